/* cuGraphLaunch from C: the replay hot path's one driver call without the Python-level
 * wrappers around it (a replay through it measured 0.4-1.5 us faster than through
 * cuda.core's Graph.launch; docs/performance.md). Optional: tracegraph falls back to
 * cuda.core where it is not built. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef int (*graph_launch_fn)(void *exec, void *stream);
typedef int (*error_name_fn)(int code, const char **name);

/* CUDA_KERNEL_NODE_PARAMS_v2 of cuda.h (CUDA 12 and 13) */
typedef struct {
    void *func;
    unsigned int grid[3], block[3], shared;
    void **params;
    void **extra;
    void *kern, *ctx;
} kernel_node_params;
typedef int (*add_kernel_node_fn)(void **node, void *graph, const void *deps, size_t ndeps,
                                  const kernel_node_params *p);

static graph_launch_fn graph_launch = NULL;
static error_name_fn error_name = NULL;
static add_kernel_node_fn add_kernel_node = NULL;

static void set_cuda_error(const char *call, int rc) {
    const char *name = NULL;
    if (error_name == NULL || error_name(rc, &name) != 0 || name == NULL) name = "CUDA_ERROR";
    PyErr_Format(PyExc_RuntimeError, "%s failed: %s (%d)", call, name, rc);
}

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
        set_cuda_error("cuGraphLaunch", rc);
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

/* One check of contract/state.py, (root + 10 * compare, a, b, attributes, expected): its
 * start (root 0: dict a at key b; 1: cell a; 2: object a; 3: argument b of this call;
 * 4: a()), then its attributes; compare 0: the very object `expected` (a bound method: the
 * same instance and function); 1: the very array expected[0] with the shape, strides and
 * dtype expected[1:]; 2: equal to `expected`; 3: finding nothing. Any error is a miss
 * (cleared), as in contract.holds. */
static int layout_matches(PyObject *now, PyObject *expected) {
    static const char *names[] = {"shape", "strides", "dtype"};
    if (!PyTuple_Check(expected) || PyTuple_GET_SIZE(expected) != 4 ||
        now != PyTuple_GET_ITEM(expected, 0))
        return 0;
    for (int i = 0; i < 3; i++) {
        PyObject *attr = PyObject_GetAttrString(now, names[i]);
        if (attr == NULL) return 0;
        int same = PyObject_RichCompareBool(attr, PyTuple_GET_ITEM(expected, i + 1), Py_EQ);
        Py_DECREF(attr);
        if (same != 1) return 0;
    }
    return 1;
}

/* A second read of one method: a new bound-method object, the same instance and function. */
static int same_method(PyObject *now, PyObject *expected) {
    if (PyMethod_Check(now) && PyMethod_Check(expected))
        return PyMethod_GET_SELF(now) == PyMethod_GET_SELF(expected) &&
               PyMethod_GET_FUNCTION(now) == PyMethod_GET_FUNCTION(expected);
    if (PyCFunction_Check(now) && PyCFunction_Check(expected))
        return PyCFunction_GET_SELF(now) == PyCFunction_GET_SELF(expected) &&
               PyCFunction_GET_FUNCTION(now) == PyCFunction_GET_FUNCTION(expected);
    return 0;
}

static int check_holds(PyObject *check, PyObject *const *given, Py_ssize_t ngiven) {
    if (!PyTuple_Check(check) || PyTuple_GET_SIZE(check) != 5) return 0;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(check, 0));
    int compare = (int)(kind / 10);
    long root = kind % 10;
    PyObject *a = PyTuple_GET_ITEM(check, 1), *b = PyTuple_GET_ITEM(check, 2);
    PyObject *steps = PyTuple_GET_ITEM(check, 3), *expected = PyTuple_GET_ITEM(check, 4);
    PyObject *now = NULL;
    if (root == 0 && PyDict_Check(a)) {
        now = PyDict_GetItemWithError(a, b);
        Py_XINCREF(now);
    } else if (root == 1 && PyCell_Check(a)) {
        now = PyCell_GET(a);
        Py_XINCREF(now);
    } else if (root == 2) {
        now = a;
        Py_INCREF(now);
    } else if (root == 3) {
        Py_ssize_t k = PyLong_AsSsize_t(b);
        if (k >= 0 && k < ngiven) {
            now = given[k];
            Py_INCREF(now);
        }
    } else if (root == 4) {
        now = PyObject_CallNoArgs(a);
    }
    if (now != NULL && PyTuple_Check(steps)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(steps) && now != NULL; i++) {
            PyObject *next = PyObject_GetAttr(now, PyTuple_GET_ITEM(steps, i));
            Py_DECREF(now);
            now = next;
        }
    } else if (now != NULL) {
        Py_DECREF(now);
        now = NULL;
    }
    int holds;
    if (compare == 3)
        holds = now == NULL;
    else if (now == NULL)
        holds = 0;
    else if (compare == 2)
        holds = PyObject_RichCompareBool(now, expected, Py_EQ) == 1;
    else if (compare == 1)
        holds = layout_matches(now, expected);
    else
        holds = now == expected || same_method(now, expected);
    Py_XDECREF(now);
    if (PyErr_Occurred()) PyErr_Clear();
    return holds;
}

/* The replay of a call with the very objects the executable is armed with
 * (executable.armed: their weak references; executable.fast: (graph exec, stream handle,
 * result, stream, checks) where result is -1 for None or the index of the argument
 * returned, stream the object the caller passed (None for the default) and checks the
 * checked names (check_holds)), checked and launched under the GIL; where a check
 * ran Python (a property, so another thread may have re-pointed, re-armed or closed it),
 * launched only if `armed` and `fast` are still the very objects read first. A new reference,
 * NotImplemented when it does not apply, NULL with RuntimeError when the launch failed. A
 * graph exec of 0 without a driver (CPU tests) checks without launching. */
static PyObject *replay_core(PyObject *executable, PyObject *const *given, Py_ssize_t ngiven,
                             PyObject *stream_given) {
    PyObject *armed = PyObject_GetAttr(executable, str_armed);
    if (armed == NULL) return NULL;
    PyObject *fast = PyObject_GetAttr(executable, str_fast);
    if (fast == NULL) { Py_DECREF(armed); return NULL; }
    PyObject *out = Py_NotImplemented;
    Py_ssize_t n = PyTuple_Check(armed) ? PyTuple_GET_SIZE(armed) : -1;
    if (n != ngiven || !PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 5 ||
        PyTuple_GET_ITEM(fast, 3) != stream_given || !PyTuple_Check(PyTuple_GET_ITEM(fast, 4)))
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = referent(PyTuple_GET_ITEM(armed, i));
        if (obj == NULL || obj != given[i]) goto done;
    }
    /* the checked names still find the same objects (check_holds) */
    PyObject *checks = PyTuple_GET_ITEM(fast, 4);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(checks); i++)
        if (!check_holds(PyTuple_GET_ITEM(checks, i), given, ngiven)) goto done;
    if (PyTuple_GET_SIZE(checks) > 0) {
        /* a check may run Python (a property) and let another thread re-point, re-arm or
         * close the executable: launch only what is still armed, as it was read */
        PyObject *armed_now = PyObject_GetAttr(executable, str_armed);
        PyObject *fast_now = armed_now ? PyObject_GetAttr(executable, str_fast) : NULL;
        int same = armed_now == armed && fast_now == fast;
        Py_XDECREF(armed_now);
        Py_XDECREF(fast_now);
        if (PyErr_Occurred()) PyErr_Clear();
        if (!same) goto done;
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
            set_cuda_error("cuGraphLaunch", rc);
            out = NULL;
            goto done;
        }
    }
    out = result < 0 ? Py_None : given[result];
done:
    Py_DECREF(armed);
    Py_DECREF(fast);
    Py_XINCREF(out);
    return out;
}

/* replay(executable, args, stream=None): replay_core for Python (the executable's own
 * replay_same). */
static PyObject *replay(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if ((nargs != 2 && nargs != 3) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "replay(executable, args: tuple, stream=None)");
        return NULL;
    }
    PyObject *given = args[1];
    return replay_core(args[0], &PyTuple_GET_ITEM(given, 0), PyTuple_GET_SIZE(given),
                       nargs == 3 ? args[2] : Py_None);
}

/* Entry(function, slow, tracing, device_local): a compiled function's call (or replay)
 * as one C call. f(*args) or f(*args, stream=s) with the very objects of the armed last
 * call, on a thread whose current device is the executable's and where nothing is being
 * traced, launches at once (replay_core) and counts a hit; anything else, and a failed
 * launch (the slow path raises it as tracegraph's error), is slow(*args, **kwargs). What
 * it saves is the Python frames before the launch (docs/performance.md, W7). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *function;     /* the CompiledFunction: its _hot executable and _hits */
    PyObject *slow;         /* the Python path */
    PyObject *tracing;      /* _numba.hooks.TRACING: [threads with a tracer] */
    PyObject *device_local; /* executable._thread: .platform, the device made current */
} Entry;

static PyObject *str_hot = NULL, *str_hits = NULL, *str_platform = NULL, *str_stream = NULL;
static PyObject *zero = NULL;

static PyObject *entry_fast(Entry *e, PyObject *const *args, Py_ssize_t n, PyObject *stream) {
    PyObject *count = PyList_Check(e->tracing) && PyList_GET_SIZE(e->tracing) == 1
                          ? PyList_GET_ITEM(e->tracing, 0) : NULL;
    if (count == NULL || !PyLong_CheckExact(count) || PyLong_AsLong(count) != 0)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *hot = PyObject_GetAttr(e->function, str_hot);
    if (hot == NULL) return NULL;
    PyObject *out = Py_NotImplemented;
    Py_INCREF(out);
    if (hot == Py_None) goto done;
    PyObject *mine = PyObject_GetAttr(hot, str_platform);
    if (mine == NULL) { PyErr_Clear(); goto done; } /* another backend's executable */
    PyObject *current = PyObject_GetAttr(e->device_local, str_platform);
    if (current == NULL) PyErr_Clear(); /* this thread's first call */
    int same = current != NULL && current == mine;
    Py_DECREF(mine);
    Py_XDECREF(current);
    if (!same) goto done;
    Py_DECREF(out);
    out = replay_core(hot, args, n, stream);
    if (out == NULL) { /* the slow path launches again and raises tracegraph's error */
        PyErr_Clear();
        out = Py_NotImplemented;
        Py_INCREF(out);
        goto done;
    }
    if (out != Py_NotImplemented) {
        PyObject *hits = PyObject_GetAttr(e->function, str_hits);
        if (hits == NULL || !PyDict_Check(hits)) { Py_XDECREF(hits); PyErr_Clear(); goto done; }
        PyObject *was = PyDict_GetItemWithError(hits, zero);
        long long k = was == NULL ? 0 : PyLong_AsLongLong(was);
        PyObject *now = PyLong_FromLongLong(k + 1);
        if (now == NULL || PyDict_SetItem(hits, zero, now) < 0) PyErr_Clear();
        Py_XDECREF(now);
        Py_DECREF(hits);
    }
done:
    Py_DECREF(hot);
    return out;
}

static PyObject *entry_call(PyObject *self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames) {
    Entry *e = (Entry *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *stream = Py_None;
    int plain = 1;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
        plain = PyTuple_GET_SIZE(kwnames) == 1 &&
                (name == str_stream || PyUnicode_Compare(name, str_stream) == 0);
        if (plain) stream = args[n];
    }
    if (plain) {
        PyObject *out = entry_fast(e, args, n, stream);
        if (out != Py_NotImplemented) return out;
        Py_DECREF(out);
    }
    return PyObject_Vectorcall(e->slow, args, nargsf, kwnames);
}

static int entry_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    Entry *e = (Entry *)self;
    PyObject *function, *slow, *tracing, *device_local;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "Entry(function, slow, tracing, device_local)");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOO!O", &function, &slow, &PyList_Type, &tracing,
                          &device_local))
        return -1;
    Py_INCREF(function); Py_INCREF(slow); Py_INCREF(tracing); Py_INCREF(device_local);
    Py_XSETREF(e->function, function);
    Py_XSETREF(e->slow, slow);
    Py_XSETREF(e->tracing, tracing);
    Py_XSETREF(e->device_local, device_local);
    e->vectorcall = entry_call;
    return 0;
}

static int entry_traverse(PyObject *self, visitproc visit, void *arg) {
    Entry *e = (Entry *)self;
    Py_VISIT(e->function);
    Py_VISIT(e->slow);
    Py_VISIT(e->tracing);
    Py_VISIT(e->device_local);
    return 0;
}

static int entry_clear(PyObject *self) {
    Entry *e = (Entry *)self;
    Py_CLEAR(e->function);
    Py_CLEAR(e->slow);
    Py_CLEAR(e->tracing);
    Py_CLEAR(e->device_local);
    return 0;
}

static void entry_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *entry_get_doc(PyObject *self, void *closure) {
    (void)closure;
    Entry *e = (Entry *)self;
    if (e->slow == NULL) Py_RETURN_NONE;
    return PyObject_GetAttrString(e->slow, "__doc__");
}

static PyGetSetDef entry_getset[] = {
    {"__doc__", entry_get_doc, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracegraph.backends.cuda._graphlaunch.Entry",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Entry, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = PyType_GenericNew,
    .tp_init = entry_init,
    .tp_traverse = entry_traverse,
    .tp_clear = entry_clear,
    .tp_dealloc = entry_dealloc,
    .tp_getset = entry_getset,
};

/* add_kernel_nodes(graph, specs): kernel nodes at the root of `graph`, one per spec
 * (function, gx, gy, gz, bx, by, bz, shared, values: bytes, offsets: tuple of the byte
 * offset of each parameter's value in `values`), through cuGraphAddKernelNode_v2 (the
 * driver copies the values). The new nodes' handles, in order; NotImplemented where the
 * driver has no such call. One C loop instead of a Python call and a parameter struct per
 * node: what made W5's build cost about 20 us a node (docs/performance.md). */
static PyObject *add_kernel_nodes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "add_kernel_nodes(graph: int, specs: list)");
        return NULL;
    }
    if (add_kernel_node == NULL) Py_RETURN_NOTIMPLEMENTED;
    void *graph = PyLong_AsVoidPtr(args[0]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(args[1]);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    void *pointers[64];
    double storage[128]; /* 8-byte aligned room for the values of a node */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *spec = PyList_GET_ITEM(args[1], k);
        unsigned long long func;
        kernel_node_params p;
        const char *values;
        Py_ssize_t nbytes;
        PyObject *offsets;
        memset(&p, 0, sizeof p);
        if (!PyArg_ParseTuple(spec, "KIIIIIIIy#O!", &func, &p.grid[0], &p.grid[1], &p.grid[2],
                              &p.block[0], &p.block[1], &p.block[2], &p.shared, &values,
                              &nbytes, &PyTuple_Type, &offsets))
            goto fail;
        Py_ssize_t count = PyTuple_GET_SIZE(offsets);
        if (count > 64 || nbytes > (Py_ssize_t)sizeof storage) {
            PyErr_SetString(PyExc_ValueError, "add_kernel_nodes: more than 64 parameters "
                                              "or 1 KiB of values");
            goto fail;
        }
        memcpy(storage, values, (size_t)nbytes);
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
            if (at < 0 || at >= nbytes) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "add_kernel_nodes: offset out of range");
                goto fail;
            }
            pointers[i] = (char *)storage + at;
        }
        p.func = (void *)(uintptr_t)func;
        p.params = count ? pointers : NULL;
        void *node = NULL;
        int rc = add_kernel_node(&node, graph, NULL, 0, &p);
        if (rc != 0) {
            set_cuda_error("cuGraphAddKernelNode", rc);
            goto fail;
        }
        PyObject *handle = PyLong_FromVoidPtr(node);
        if (handle == NULL) goto fail;
        PyList_SET_ITEM(out, k, handle);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"add_kernel_nodes", (PyCFunction)(void (*)(void))add_kernel_nodes, METH_FASTCALL,
     "add_kernel_nodes(graph, specs): kernel nodes at the graph's root; their handles"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(graph_exec: int, stream: int): cuGraphLaunch; raises RuntimeError on failure"},
    {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
     "replay(executable, args, stream=None): launch if args are the armed objects, else "
     "NotImplemented"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_graphlaunch", NULL, -1, methods};

/* Without a driver (a machine with no GPU) the module loads and `launch` raises: `replay`'s
 * checks stay testable on the CPU. */
PyMODINIT_FUNC PyInit__graphlaunch(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib != NULL) {
        graph_launch = (graph_launch_fn)dlsym(lib, "cuGraphLaunch");
        error_name = (error_name_fn)dlsym(lib, "cuGetErrorName");
        add_kernel_node = (add_kernel_node_fn)dlsym(lib, "cuGraphAddKernelNode_v2");
    }
    str_armed = PyUnicode_InternFromString("armed");
    str_fast = PyUnicode_InternFromString("fast");
    str_hot = PyUnicode_InternFromString("_hot");
    str_hits = PyUnicode_InternFromString("_hits");
    str_platform = PyUnicode_InternFromString("platform");
    str_stream = PyUnicode_InternFromString("stream");
    zero = PyLong_FromLong(0);
    if (str_armed == NULL || str_fast == NULL || str_hot == NULL || str_hits == NULL ||
        str_platform == NULL || str_stream == NULL || zero == NULL)
        return NULL;
    if (PyType_Ready(&EntryType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&EntryType);
    if (PyModule_AddObject(m, "Entry", (PyObject *)&EntryType) < 0) {
        Py_DECREF(&EntryType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
