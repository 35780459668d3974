typedef int mdev_no_functions; /* a library CANN programs load by name; its functions are its dependencies' */
