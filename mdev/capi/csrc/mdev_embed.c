/*
 * mdev_embed.c -- libmdev_embed.so: runs mdev's Python faces inside a C or C++ program
 * (the C face's default; libmdev_client.so loads it and hands it every call).
 *
 *   any thread of the program                     this library                    Python
 *   ------------------------------------------    -----------------------------  -------------------------
 *   first call (any function, even before aclInit) start the interpreter once --> mdev.capi.embedding
 *                                                  (or join the one already          .prepare(root, owned)
 *                                                  running: a Python program that
 *                                                  loaded the library with ctypes)
 *   every call --> mdev_vcall(face, index, ...)    take the GIL, build arguments --> face.entry(name)(*args)
 *                                                  release it on return; Python
 *                                                  code that blocks (synchronize,
 *                                                  waits) releases it meanwhile
 *   exit()                                         run Python's atexit functions --> mdev.capi.embedding.at_exit
 *
 * A C thread keeps one Python thread state for its whole life (made on its first call,
 * dropped when it exits), so the runtime's per-thread state (current context, last error,
 * error messages) lasts between calls as it does for a Python thread.  The interpreter is
 * started without Python's signal handlers: Ctrl-C and friends stay the program's.
 * Python itself is found through MDEV_PYTHON and mdev through MDEV_ROOT (mdev_config.h,
 * written by ``mdev cann-home`` for the interpreter that built the library).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mdev_config.h"
#include "mdev_embed.h"

#define MAX_ARGS 16

static pthread_once_t started = PTHREAD_ONCE_INIT;
static int usable;                 /* Python runs and mdev.capi.embedding imported */
static int owned;                  /* this library started the interpreter */
static PyObject* embedding;        /* mdev.capi.embedding */
static pthread_key_t thread_key;   /* set for C threads that got a lasting Python thread state */
static __thread int thread_ready;

static void at_exit(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* done = PyObject_CallMethod(embedding, "at_exit", NULL);
    if (done == NULL) {
        PyErr_Print();
    }
    Py_XDECREF(done);
    PyGILState_Release(gil);
}

/* a C thread ends: drop the Python thread state it kept (count 1 -> 0 deletes it) */
static void thread_exit(void* unused)
{
    (void)unused;
    PyThreadState* state = PyGILState_GetThisThreadState();
    if (state != NULL) {
        PyEval_RestoreThread(state);
        PyGILState_Release(PyGILState_UNLOCKED);
    }
}

static int prepare(void)
{
    PyObject* path = PySys_GetObject("path");          /* borrowed */
    PyObject* root = PyUnicode_DecodeFSDefault(MDEV_ROOT);
    int ok = path != NULL && root != NULL;
    /* mdev's own checkout first when the interpreter is ours; a host program keeps its own */
    if (ok && PySequence_Contains(path, root) == 0) {
        ok = (owned ? PyList_Insert(path, 0, root) : PyList_Append(path, root)) == 0;
    }
    Py_XDECREF(root);
    if (ok) {
        embedding = PyImport_ImportModule("mdev.capi.embedding");
        PyObject* done = embedding ? PyObject_CallMethod(embedding, "prepare", "si", MDEV_ROOT, owned) : NULL;
        ok = done != NULL;
        Py_XDECREF(done);
    }
    if (!ok) {
        fprintf(stderr, "mdev: cannot load mdev's Python runtime (interpreter %s, mdev at %s):\n",
                MDEV_PYTHON, MDEV_ROOT);
        PyErr_Print();
    }
    return ok;
}

static void start(void)
{
    if (!Py_IsInitialized()) {
        PyConfig config;
        PyConfig_InitPythonConfig(&config);
        config.install_signal_handlers = 0;
        config.parse_argv = 0;
        PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, MDEV_PYTHON);
        if (!PyStatus_Exception(status)) {
            status = Py_InitializeFromConfig(&config);
        }
        PyConfig_Clear(&config);
        if (PyStatus_Exception(status)) {
            fprintf(stderr, "mdev: cannot start Python (%s): %s\n", MDEV_PYTHON,
                    status.err_msg ? status.err_msg : "unknown error");
            return;
        }
        owned = 1;
        usable = prepare();
        PyEval_SaveThread();                            /* every call takes the GIL for itself */
        if (usable) {
            atexit(at_exit);
        }
    } else {
        PyGILState_STATE gil = PyGILState_Ensure();
        usable = prepare();
        PyGILState_Release(gil);
    }
    pthread_key_create(&thread_key, thread_exit);
}

static int enter(PyGILState_STATE* gil)
{
    pthread_once(&started, start);
    if (!usable) {
        return 0;
    }
    if (!thread_ready) {
        if (PyGILState_GetThisThreadState() == NULL) {
            /* a thread Python has not seen: give it a thread state that lasts until it exits */
            PyGILState_Ensure();
            pthread_setspecific(thread_key, &thread_key);
            PyEval_SaveThread();
        }
        thread_ready = 1;
    }
    *gil = PyGILState_Ensure();
    return 1;
}

static PyObject* entry(mdev_face* face, int index)
{
    if (face->entries[index] == NULL) {
        PyObject* module = PyImport_ImportModule(face->module);
        if (module != NULL) {
            face->entries[index] = PyObject_CallMethod(module, "entry", "s", face->names[index]);
            Py_DECREF(module);
        }
    }
    return face->entries[index];
}

static PyObject* argument(char letter, va_list* args)
{
    switch (letter) {
    case 'i':
        return PyLong_FromLongLong(va_arg(*args, long long));
    case 'u':
    case 'p':
        return PyLong_FromUnsignedLongLong(va_arg(*args, unsigned long long));
    case 'f':
        return PyFloat_FromDouble(va_arg(*args, double));
    case 's': {
        const char* text = va_arg(*args, const char*);
        return text != NULL ? PyBytes_FromString(text) : Py_NewRef(Py_None);
    }
    case 'b': {
        const char* data = va_arg(*args, const char*);
        size_t size = va_arg(*args, size_t);
        return PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
    }
    default:
        PyErr_Format(PyExc_SystemError, "mdev: bad argument letter '%c'", letter);
        return NULL;
    }
}

static uint64_t word(PyObject* value, char kind)
{
    if (kind == 'f') {
        double real = PyFloat_AsDouble(value);
        uint64_t bits;
        memcpy(&bits, &real, sizeof bits);
        return bits;
    }
    return value == Py_None ? 0 : PyLong_AsUnsignedLongLongMask(value);
}

/* ret, or (values..., ret) with one value per output letter */
static void unpack(PyObject* value, const char* outputs, mdev_result* result)
{
    size_t n = strlen(outputs);
    if (!PyTuple_Check(value)) {
        result->ret = word(value, 'i');
        return;
    }
    if ((size_t)PyTuple_GET_SIZE(value) != n + 1 || n > MDEV_MAX_OUTPUTS) {
        PyErr_Format(PyExc_SystemError, "mdev: %zd values returned for %zu outputs",
                     PyTuple_GET_SIZE(value) - 1, n);
        return;
    }
    result->ret = word(PyTuple_GET_ITEM(value, n), 'i');
    for (size_t i = 0; i < n; i++) {
        result->out[i] = word(PyTuple_GET_ITEM(value, i), outputs[i]);
    }
    result->stored = 1;
}

void mdev_vcall(mdev_face* face, int index, uint64_t fail, mdev_result* result, const char* outputs,
                const char* format, va_list args)
{
    PyGILState_STATE gil;
    result->ret = fail;
    result->stored = 0;
    if (!enter(&gil)) {
        return;
    }
    PyObject* argv[MAX_ARGS];
    size_t argc = 0;
    PyObject* fn = entry(face, index);
    va_list taken;
    va_copy(taken, args);
    for (const char* letter = format; fn != NULL && *letter && argc < MAX_ARGS; letter++) {
        argv[argc] = argument(*letter, &taken);
        if (argv[argc] == NULL) {
            fn = NULL;
            break;
        }
        argc++;
    }
    va_end(taken);
    PyObject* value = fn != NULL ? PyObject_Vectorcall(fn, argv, argc, NULL) : NULL;
    if (value != NULL) {
        unpack(value, outputs, result);
        Py_DECREF(value);
    }
    if (PyErr_Occurred()) {   /* an mdev bug, not the caller's error: say so, fail the call */
        fprintf(stderr, "mdev: %s failed inside the emulator:\n", face->names[index]);
        PyErr_Print();
        result->ret = fail;
        result->stored = 0;
    }
    for (size_t i = 0; i < argc; i++) {
        Py_DECREF(argv[i]);
    }
    PyGILState_Release(gil);
}
