// Hand-built CUDA graphs for W1 (chain of N tiny kernels) and W2 (8 chains of
// 16 kernels + a join): the physical limit the Python contenders are held to.
// Graphs are built node by node with cudaGraphCreate / cudaGraphAddKernelNode,
// instantiated once and launched many times. Prints one JSON object on stdout.
//
// Build: nvcc -O3 -arch=sm_90 -o graphs graphs.cu
// Usage: graphs [--n 10,100,1000] [--size 1024] [--block 256] [--chains 8]
//               [--len 16] [--warmup 20] [--iters 200] [--pk 10] [--reps 20]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CK(call)                                                              \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorString(e_));                                   \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

constexpr int kMaxChains = 8;
const float kA = 0.999f, kB = 0.001f;

__global__ void axpb(float* x, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

struct Inputs {
  const float* p[kMaxChains];
};

__global__ void join(Inputs in, int nin, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.f;
    for (int c = 0; c < nin; ++c) s += in.p[c][i];
    out[i] = s;
  }
}

struct Opts {
  std::vector<int> ns{10, 100, 1000};
  int size = 1024, block = 256, chains = 8, len = 16;
  int warmup = 20, iters = 200, pk = 10, reps = 20;
};

struct Stats {
  double median, p10, p90;
  int n;
};

static double pct(std::vector<double> v, double q) {  // linear, as numpy
  std::sort(v.begin(), v.end());
  double pos = q * (v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

static Stats stats(const std::vector<double>& v) {
  return {pct(v, 0.5), pct(v, 0.1), pct(v, 0.9), static_cast<int>(v.size())};
}

static std::string json(const Stats& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"median\": %.4f, \"p10\": %.4f, \"p90\": %.4f, \"n\": %d}",
                s.median, s.p10, s.p90, s.n);
  return buf;
}

using Clock = std::chrono::steady_clock;
static double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Times `step` (asynchronous on stream s) three ways, as the Python harness does.
static std::string time_step(const Opts& o, cudaStream_t s,
                             const std::function<void()>& step) {
  for (int i = 0; i < o.warmup; ++i) step();
  CK(cudaStreamSynchronize(s));
  std::vector<double> sync_us, event_us, piped_us;
  for (int i = 0; i < o.iters; ++i) {  // host clock around step + sync
    auto t0 = Clock::now();
    step();
    CK(cudaStreamSynchronize(s));
    sync_us.push_back(us_since(t0));
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < o.iters; ++i) {  // CUDA events around one step
    CK(cudaEventRecord(e0, s));
    step();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    event_us.push_back(ms * 1e3);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  for (int r = 0; r < o.reps; ++r) {  // K steps back to back, one sync
    auto t0 = Clock::now();
    for (int k = 0; k < o.pk; ++k) step();
    CK(cudaStreamSynchronize(s));
    piped_us.push_back(us_since(t0) / o.pk);
  }
  return "{\"step_us\": " + json(stats(sync_us)) +
         ", \"step_event_us\": " + json(stats(event_us)) +
         ", \"step_pipelined_us\": " + json(stats(piped_us)) + "}";
}

struct GraphBuilder {
  cudaGraph_t g = nullptr;
  int grid, block, n;
  GraphBuilder(int size, int blk) : grid((size + blk - 1) / blk), block(blk), n(size) {
    CK(cudaGraphCreate(&g, 0));
  }
  cudaGraphNode_t axpb_node(float* x, const std::vector<cudaGraphNode_t>& deps) {
    float a = kA, b = kB;
    int nn = n;
    void* args[] = {&x, &nn, &a, &b};  // copied by cudaGraphAddKernelNode
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(axpb);
    p.gridDim = dim3(grid);
    p.blockDim = dim3(block);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, deps.data(), deps.size(), &p));
    return node;
  }
  cudaGraphNode_t join_node(Inputs in, int nin, float* out,
                            const std::vector<cudaGraphNode_t>& deps) {
    int nn = n;
    void* args[] = {&in, &nin, &out, &nn};
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(join);
    p.gridDim = dim3(grid);
    p.blockDim = dim3(block);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, deps.data(), deps.size(), &p));
    return node;
  }
  // Returns the exec graph; *inst_us gets build-independent instantiate time.
  cudaGraphExec_t instantiate(double* inst_us) {
    cudaGraphExec_t ex;
    auto t0 = Clock::now();
    CK(cudaGraphInstantiate(&ex, g, 0));
    *inst_us = us_since(t0);
    return ex;
  }
};

static std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

static Opts parse(int argc, char** argv) {
  Opts o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--n") o.ns = parse_list(v);
    else if (k == "--size") o.size = std::atoi(v);
    else if (k == "--block") o.block = std::atoi(v);
    else if (k == "--chains") o.chains = std::min(std::atoi(v), kMaxChains);
    else if (k == "--len") o.len = std::atoi(v);
    else if (k == "--warmup") o.warmup = std::atoi(v);
    else if (k == "--iters") o.iters = std::atoi(v);
    else if (k == "--pk") o.pk = std::atoi(v);
    else if (k == "--reps") o.reps = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int grid = (o.size + o.block - 1) / o.block;
  const size_t bytes = sizeof(float) * o.size;
  std::vector<float> host(o.size);
  for (int i = 0; i < o.size; ++i) host[i] = 2.0f * i / std::max(1, o.size - 1);

  std::printf("{\"device\": \"%s\", \"size\": %d, \"block\": %d, \"w1\": [", prop.name,
              o.size, o.block);
  // ---------------------------------------------------------------- W1
  float* x;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice));
  for (size_t t = 0; t < o.ns.size(); ++t) {
    int n = o.ns[t];
    auto t0 = Clock::now();
    GraphBuilder b(o.size, o.block);
    std::vector<cudaGraphNode_t> prev;
    for (int i = 0; i < n; ++i) prev = {b.axpb_node(x, prev)};
    double build_us = us_since(t0), inst_us = 0;
    cudaGraphExec_t ex = b.instantiate(&inst_us);
    std::string graph = time_step(o, s, [&] { CK(cudaGraphLaunch(ex, s)); });
    std::string eager = time_step(o, s, [&] {
      for (int i = 0; i < n; ++i) axpb<<<grid, o.block, 0, s>>>(x, o.size, kA, kB);
    });
    CK(cudaGetLastError());
    std::printf("%s{\"n\": %d, \"build_us\": %.2f, \"instantiate_us\": %.2f, "
                "\"graph\": %s, \"eager\": %s}",
                t ? ", " : "", n, build_us, inst_us, graph.c_str(), eager.c_str());
    CK(cudaGraphExecDestroy(ex));
    CK(cudaGraphDestroy(b.g));
  }
  std::printf("], ");
  // ---------------------------------------------------------------- W2
  Inputs in = {};
  std::vector<float*> xs(o.chains);
  for (int c = 0; c < o.chains; ++c) {
    CK(cudaMalloc(&xs[c], bytes));
    CK(cudaMemcpy(xs[c], host.data(), bytes, cudaMemcpyHostToDevice));
    in.p[c] = xs[c];
  }
  float* out;
  CK(cudaMalloc(&out, bytes));
  std::string w2[3];
  for (int variant = 0; variant < 2; ++variant) {  // 0: fork/join DAG, 1: serial
    GraphBuilder b(o.size, o.block);
    std::vector<cudaGraphNode_t> tails, prev;
    for (int c = 0; c < o.chains; ++c) {
      if (variant == 0) prev.clear();
      for (int i = 0; i < o.len; ++i) prev = {b.axpb_node(xs[c], prev)};
      tails.push_back(prev[0]);
    }
    b.join_node(in, o.chains, out, variant == 0 ? tails : prev);
    double inst_us = 0;
    cudaGraphExec_t ex = b.instantiate(&inst_us);
    w2[variant] = time_step(o, s, [&] { CK(cudaGraphLaunch(ex, s)); });
    CK(cudaGraphExecDestroy(ex));
    CK(cudaGraphDestroy(b.g));
  }
  w2[2] = time_step(o, s, [&] {
    for (int c = 0; c < o.chains; ++c)
      for (int i = 0; i < o.len; ++i) axpb<<<grid, o.block, 0, s>>>(xs[c], o.size, kA, kB);
    join<<<grid, o.block, 0, s>>>(in, o.chains, out, o.size);
  });
  CK(cudaGetLastError());
  std::printf("\"w2\": {\"chains\": %d, \"len\": %d, \"dag\": %s, \"serial\": %s, "
              "\"eager\": %s}}\n",
              o.chains, o.len, w2[0].c_str(), w2[1].c_str(), w2[2].c_str());
  CK(cudaStreamSynchronize(s));
  return 0;
}
