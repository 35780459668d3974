"""The mdev command line."""
