/* A graph launch from C: the replay hot path's one CUDA call without the Python-level
 * wrappers around it: the driver's cuGraphLaunch (`launch`), or the runtime's
 * cudaGraphLaunch (`launch_runtime`, once `use_runtime(path)` loaded libcudart), which CuPy
 * calls (docs/performance.md). Optional: tracegraph falls back to cuda.core where it is not
 * built. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

typedef int (*graph_launch_fn)(void *exec, void *stream);
typedef int (*error_name_fn)(int code, const char **name);

typedef const char *(*rt_error_name_fn)(int code);

static graph_launch_fn graph_launch = NULL;
static error_name_fn error_name = NULL;
static graph_launch_fn rt_graph_launch = NULL;
static rt_error_name_fn rt_error_name = NULL;

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

static PyObject *launch_runtime(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (rt_graph_launch == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "use_runtime(path) has not loaded libcudart");
        return NULL;
    }
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch_runtime(graph_exec, stream) takes two handles");
        return NULL;
    }
    void *exec = PyLong_AsVoidPtr(args[0]);
    void *stream = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred()) return NULL;
    int rc = rt_graph_launch(exec, stream);
    if (rc != 0) {
        const char *name = rt_error_name != NULL ? rt_error_name(rc) : NULL;
        PyErr_Format(PyExc_RuntimeError, "cudaGraphLaunch failed: %s (%d)",
                     name != NULL ? name : "cudaError", rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *use_runtime(PyObject *self, PyObject *path) {
    (void)self;
    const char *p = PyUnicode_AsUTF8(path);
    if (p == NULL) return NULL;
    void *lib = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_OSError, "dlopen(%s) failed: %s", p, dlerror());
        return NULL;
    }
    graph_launch_fn fn = (graph_launch_fn)dlsym(lib, "cudaGraphLaunch");
    if (fn == NULL) {
        PyErr_Format(PyExc_OSError, "%s has no cudaGraphLaunch", p);
        return NULL;
    }
    rt_error_name = (rt_error_name_fn)dlsym(lib, "cudaGetErrorName");
    rt_graph_launch = fn;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(graph_exec: int, stream: int): cuGraphLaunch; raises RuntimeError on failure"},
    {"launch_runtime", (PyCFunction)(void (*)(void))launch_runtime, METH_FASTCALL,
     "launch_runtime(graph_exec: int, stream: int): cudaGraphLaunch; RuntimeError on failure"},
    {"use_runtime", use_runtime, METH_O,
     "use_runtime(path): load libcudart from path for launch_runtime"},
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
