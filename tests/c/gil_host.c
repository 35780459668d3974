/* gil_host.c -- a C program that embeds Python (as a framework's C++ host does) and holds
 * the GIL while a thread of its own calls the API: run_worker() of libworker.so (worker.c)
 * starts that thread and joins it.  The library must not wait for this GIL. */
#include <Python.h>
#include <stdio.h>

int run_worker(void);

int main(void)
{
    Py_Initialize();                       /* this thread now holds the GIL, and keeps it */
    PyRun_SimpleString("import sys");
    int failures = run_worker();
    printf("gil_host: %d failures\n", failures);
    Py_Finalize();
    return failures;
}
