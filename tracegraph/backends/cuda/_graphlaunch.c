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
    int rc = graph_launch(exec, stream);
    if (rc != 0) {
        const char *name = NULL;
        if (error_name == NULL || error_name(rc, &name) != 0 || name == NULL) name = "CUDA_ERROR";
        PyErr_Format(PyExc_RuntimeError, "cuGraphLaunch failed: %s (%d)", name, rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(graph_exec: int, stream: int): cuGraphLaunch; raises RuntimeError on failure"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_graphlaunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__graphlaunch(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_SetString(PyExc_ImportError, "libcuda.so.1 not found");
        return NULL;
    }
    graph_launch = (graph_launch_fn)dlsym(lib, "cuGraphLaunch");
    error_name = (error_name_fn)dlsym(lib, "cuGetErrorName");
    if (graph_launch == NULL) {
        PyErr_SetString(PyExc_ImportError, "libcuda.so.1 has no cuGraphLaunch");
        return NULL;
    }
    return PyModule_Create(&module);
}
