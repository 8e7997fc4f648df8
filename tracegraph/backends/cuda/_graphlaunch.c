/* cuGraphLaunch from C: the replay hot path's one driver call without the Python-level
 * wrappers around it (a replay through it measured 0.4-1.5 us faster than through
 * cuda.core's Graph.launch; docs/performance.md). Optional: tracegraph falls back to
 * cuda.core where it is not built. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

typedef int (*graph_launch_fn)(void *exec, void *stream);
typedef int (*error_name_fn)(int code, const char **name);

static graph_launch_fn graph_launch = NULL;
static error_name_fn error_name = NULL;

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch(graph_exec, stream) takes two handles");
        return NULL;
    }
    void *exec = PyLong_AsVoidPtr(args[0]);
    void *stream = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (graph_launch == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cuGraphLaunch: no CUDA driver loaded");
        return NULL;
    }
    int rc = graph_launch(exec, stream);
    if (rc != 0) {
        const char *name = NULL;
        if (error_name == NULL || error_name(rc, &name) != 0 || name == NULL) name = "CUDA_ERROR";
        PyErr_Format(PyExc_RuntimeError, "cuGraphLaunch failed: %s (%d)", name, rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *str_armed = NULL, *str_fast = NULL;

/* The object a weak reference (or a 1-tuple holding it) refers to, borrowed; NULL if gone. */
static PyObject *referent(PyObject *ref) {
    if (PyTuple_Check(ref)) return PyTuple_GET_SIZE(ref) == 1 ? PyTuple_GET_ITEM(ref, 0) : NULL;
    if (!PyWeakref_CheckRef(ref)) return NULL;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) != 1) return NULL;
    Py_DECREF(obj); /* the caller's argument tuple holds it if it is the same object */
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    return obj == Py_None ? NULL : obj;
#endif
}

/* replay(executable, args): the replay of a call with the very objects the executable is
 * armed with (executable.armed: their weak references; executable.fast: (graph exec,
 * stream, result) where result is -1 for None or the index of the argument returned),
 * checked and launched under the GIL, so no other thread re-points the graph in between.
 * NotImplemented when it does not apply. A graph exec of 0 without a driver (CPU tests)
 * checks without launching. */
static PyObject *replay(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "replay(executable, args: tuple)");
        return NULL;
    }
    PyObject *given = args[1];
    PyObject *armed = PyObject_GetAttr(args[0], str_armed);
    if (armed == NULL) return NULL;
    PyObject *fast = PyObject_GetAttr(args[0], str_fast);
    if (fast == NULL) { Py_DECREF(armed); return NULL; }
    PyObject *out = Py_NotImplemented;
    Py_ssize_t n = PyTuple_Check(armed) ? PyTuple_GET_SIZE(armed) : -1;
    if (n != PyTuple_GET_SIZE(given) || !PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 3)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = referent(PyTuple_GET_ITEM(armed, i));
        if (obj == NULL || obj != PyTuple_GET_ITEM(given, i)) goto done;
    }
    void *exec = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, 0));
    void *stream = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, 1));
    Py_ssize_t result = PyLong_AsSsize_t(PyTuple_GET_ITEM(fast, 2));
    if (PyErr_Occurred()) { out = NULL; goto done; }
    if (result >= n) goto done;
    if (exec != NULL || graph_launch != NULL) {
        if (graph_launch == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "cuGraphLaunch: no CUDA driver loaded");
            out = NULL;
            goto done;
        }
        int rc = graph_launch(exec, stream);
        if (rc != 0) {
            const char *name = NULL;
            if (error_name == NULL || error_name(rc, &name) != 0 || name == NULL)
                name = "CUDA_ERROR";
            PyErr_Format(PyExc_RuntimeError, "cuGraphLaunch failed: %s (%d)", name, rc);
            out = NULL;
            goto done;
        }
    }
    out = result < 0 ? Py_None : PyTuple_GET_ITEM(given, result);
done:
    Py_DECREF(armed);
    Py_DECREF(fast);
    Py_XINCREF(out);
    return out;
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(graph_exec: int, stream: int): cuGraphLaunch; raises RuntimeError on failure"},
    {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
     "replay(executable, args): launch if args are the armed objects, else NotImplemented"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_graphlaunch", NULL, -1, methods};

/* Without a driver (a machine with no GPU) the module loads and `launch` raises: `replay`'s
 * checks stay testable on the CPU. */
PyMODINIT_FUNC PyInit__graphlaunch(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib != NULL) {
        graph_launch = (graph_launch_fn)dlsym(lib, "cuGraphLaunch");
        error_name = (error_name_fn)dlsym(lib, "cuGetErrorName");
    }
    str_armed = PyUnicode_InternFromString("armed");
    str_fast = PyUnicode_InternFromString("fast");
    if (str_armed == NULL || str_fast == NULL) return NULL;
    return PyModule_Create(&module);
}
