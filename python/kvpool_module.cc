// The `kvpool` Python module: the pool client, an in-process pool, and the engine-side KV
// connector (chunk keys, paged-KV packing, prefix lookup, async restore and save).
//
// Errors become kvpool.Error (a RuntimeError whose text starts with the status code, e.g.
// "NOT_FOUND: ..."). Blocking calls release the GIL. Buffers are numpy arrays / bytes-likes
// (buffer protocol), torch tensors (data_ptr()) or CUDA arrays (__cuda_array_interface__).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>


#include "client/client.h"
#include "connector/chunk_keys.h"
#include "connector/chunk_packing.h"
#include "connector/chunk_store.h"
#include "connector/connector_metrics.h"
#include "connector/kv_namespace.h"
#include "connector/paged_kv_layout.h"
#include "connector/prefix_lookup.h"
#include "connector/restore_engine.h"
#include "connector/save_engine.h"
#include "embedded/embedded_pool.h"
#include "http/metrics_endpoint.h"
#include "py_buffer.h"

namespace py = pybind11;
using namespace kvpool;
using namespace kvpool::connector;
using kvpool::python::ResolveBuffer;

namespace {

using Int32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

py::object g_error;  // kvpool.Error

[[noreturn]] void Raise(const Status& s) {
  PyErr_SetString(g_error.ptr(), s.ToString().c_str());
  throw py::error_already_set();
}
void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

std::span<const int32_t> Span(const Int32Array& a) { return {a.data(), static_cast<size_t>(a.size())}; }
std::vector<int32_t> Vector(const Int32Array& a) { return {a.data(), a.data() + a.size()}; }
// A wait's deadline, timeout_ms from now.
std::chrono::steady_clock::time_point Deadline(uint64_t timeout_ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

// An in-process pool: a master on 127.0.0.1 and one storage service.
class LocalPool {
 public:
  LocalPool(uint64_t memory_bytes, uint64_t lease_ms, bool huge_pages, uint32_t part)
      : pool_(Take(embedded::EmbeddedPool::Start(
            {.memory_bytes = memory_bytes, .lease_ms = lease_ms, .use_huge_pages = huge_pages, .part = part}))) {}
  void Close() { pool_.reset(); }
  std::string address() const { return pool_ ? pool_->address() : ""; }

 private:
  std::unique_ptr<embedded::EmbeddedPool> pool_;
};

// One stage's paged cache built from Python buffers, which it keeps alive.
struct PyPagedKvCache {
  PagedKvCache cache;
  int cuda_device = -1;
  py::list planes;
};

PyPagedKvCache MakeCache(const KvModelSpec& spec, uint32_t stage, py::list planes, uint64_t block_stride_bytes) {
  Check(spec.Validate());
  if (stage >= spec.num_stages()) Raise(InvalidArgument("stage " + std::to_string(stage) + " of " + std::to_string(spec.num_stages())));
  PyPagedKvCache c;
  c.cache.layout = PagedKvLayout::ForStage(spec, stage);
  c.cache.layout.block_stride_bytes = block_stride_bytes;
  Check(c.cache.layout.Validate());
  c.planes = planes;
  uint64_t min_blocks = UINT64_MAX;
  bool first = true;
  for (py::handle h : planes) {
    python::RawBuffer b = ResolveBuffer(py::reinterpret_borrow<py::object>(h), true);
    if (first) c.cuda_device = b.cuda_device;
    if (b.cuda_device != c.cuda_device) Raise(InvalidArgument("planes of one stage live on different devices"));
    first = false;
    c.cache.plane_bases.push_back(b.data);
    // A plane of n blocks spans (n-1) strides plus one block.
    const uint64_t blocks = b.bytes < c.cache.layout.block_bytes()
                                ? 0
                                : (b.bytes - c.cache.layout.block_bytes()) / c.cache.layout.block_stride() + 1;
    min_blocks = std::min(min_blocks, blocks);
  }
  c.cache.num_blocks = first ? 0 : min_blocks;
  Check(c.cache.Validate());
  return c;
}

py::dict OutcomeDict(const RestoreOutcome& o) {
  py::dict d;
  d["request_id"] = o.request_id;
  d["ok"] = o.status.ok();
  d["status"] = o.status.ok() ? std::string("OK") : o.status.ToString();
  d["planned_tokens"] = o.planned_tokens;
  d["restored_tokens"] = o.restored_tokens;
  d["end_token"] = o.end_token;
  d["fell_back"] = o.fell_back();
  return d;
}

py::dict OutcomeDict(const SaveOutcome& o) {
  py::dict d;
  d["request_id"] = o.request_id;
  d["ok"] = o.status.ok();
  d["status"] = o.status.ok() ? std::string("OK") : o.status.ToString();
  d["objects_put"] = o.objects_put;
  d["objects_skipped"] = o.objects_skipped;
  d["objects_failed"] = o.objects_failed;
  return d;
}

// The connector for one engine: lookup + restore + save over one client.
class PyConnector {
 public:
  PyConnector(client::Client* client, const KvModelSpec& spec, std::vector<PyPagedKvCache> stages,
              uint64_t restore_timeout_ms, uint32_t restore_workers_per_stage, uint64_t staging_bytes_per_stage,
              size_t max_pending_saves)
      : store_(client), ns_(Take(KvNamespace::Create(spec))), stages_(std::move(stages)) {
    std::vector<StageDevice> devices;
    for (auto& s : stages_) devices.push_back(StageDevice{s.cache, s.cuda_device});
    RestoreOptions ro;
    ro.timeout = std::chrono::milliseconds(restore_timeout_ms);
    ro.workers_per_stage = restore_workers_per_stage;
    ro.staging_bytes_per_stage = staging_bytes_per_stage;
    restore_ = Take(RestoreEngine::Create(&store_, ns_, devices, ro, &metrics_));
    SaveOptions so;
    so.max_pending_requests = max_pending_saves;
    so.staging_bytes_per_stage = staging_bytes_per_stage;
    save_ = Take(SaveEngine::Create(&store_, ns_, devices, so, &metrics_));
  }

  PrefixHit Lookup(const Int32Array& tokens, uint64_t gpu_cached_tokens) {
    std::vector<int32_t> t = Vector(tokens);
    py::gil_scoped_release nogil;
    auto r = FindCachedPrefix(store_, ns_, t, gpu_cached_tokens, &metrics_);
    py::gil_scoped_acquire gil;
    return Take(std::move(r));
  }
  void StartRestore(uint64_t id, const PrefixHit& hit, const std::vector<Int32Array>& tables) {
    std::vector<std::vector<BlockId>> t;
    for (auto& a : tables) t.push_back(Vector(a));
    Check(restore_->Start(id, hit, std::move(t)));
  }
  std::optional<py::dict> PollRestore(uint64_t id) {
    std::optional<RestoreOutcome> o;
    {
      py::gil_scoped_release nogil;
      o = restore_->Poll(id);
    }
    if (!o) return std::nullopt;
    return OutcomeDict(*o);
  }
  // At the deadline: an outcome with NOT_READY, and the restore goes on (wait or poll again).
  py::dict WaitRestore(uint64_t id, uint64_t timeout_ms) {
    RestoreOutcome o;
    {
      py::gil_scoped_release nogil;
      o = restore_->Wait(id, Deadline(timeout_ms));
    }
    return OutcomeDict(o);
  }
  // False when the save queue is full (the save is dropped and counted).
  bool Save(uint64_t id, const Int32Array& tokens, const std::vector<Int32Array>& tables, uint64_t first_chunk) {
    std::vector<std::vector<BlockId>> t;
    for (auto& a : tables) t.push_back(Vector(a));
    Status s = save_->Submit(id, Span(tokens), std::move(t), first_chunk);
    if (s.code() == StatusCode::kUnavailable) return false;
    Check(s);
    return true;
  }
  std::optional<py::dict> PollSave(uint64_t id) {
    auto o = save_->Poll(id);
    if (!o) return std::nullopt;
    return OutcomeDict(*o);
  }
  // As WaitRestore.
  py::dict WaitSave(uint64_t id, uint64_t timeout_ms) {
    SaveOutcome o;
    {
      py::gil_scoped_release nogil;
      o = save_->Wait(id, Deadline(timeout_ms));
    }
    return OutcomeDict(o);
  }
  std::map<std::string, uint64_t> Metrics() const { return metrics_.Snapshot(); }
  const ConnectorMetrics& metrics() const { return metrics_; }
  const KvNamespace& ns() const { return ns_; }

 private:
  PoolChunkStore store_;
  KvNamespace ns_;
  std::vector<PyPagedKvCache> stages_;
  ConnectorMetrics metrics_;
  // Destroyed first (declared last): workers stop before the store and caches go.
  std::unique_ptr<RestoreEngine> restore_;
  std::unique_ptr<SaveEngine> save_;
};

// The Prometheus text of connectors (summed) and clients' transfer engines (summed): what a
// process using the module exports, through MetricsServer or its own HTTP server.
class ProcessMetrics {
 public:
  ProcessMetrics(const std::vector<PyConnector*>& connectors, const std::vector<client::Client*>& clients) {
    for (const PyConnector* c : connectors) connectors_.push_back(&c->metrics());
    for (client::Client* c : clients) transfers_.push_back(&c->transfer_engine().metrics());
  }
  // Reads only atomics: safe on any thread, without the GIL.
  void AppendTo(std::string* out) const {
    ConnectorMetrics::AppendPrometheus(connectors_, out);
    transfer::TransferMetrics::AppendPrometheus(transfers_, out);
  }

 private:
  std::vector<const ConnectorMetrics*> connectors_;
  std::vector<const transfer::TransferMetrics*> transfers_;
};

// /metrics and /health of this process on its own port (http::MetricsEndpoint's threads).
class MetricsServer {
 public:
  // Holds a reference to every connector and client it reads, so none goes while it serves.
  MetricsServer(const std::string& listen, const py::list& connectors, const py::list& clients)
      : metrics_(connectors.cast<std::vector<PyConnector*>>(), clients.cast<std::vector<client::Client*>>()) {
    for (const py::handle& h : connectors) owners_.push_back(py::reinterpret_borrow<py::object>(h));
    for (const py::handle& h : clients) owners_.push_back(py::reinterpret_borrow<py::object>(h));
    endpoint_ = Take(http::MetricsEndpoint::StartMetricsAndHealth(
        listen, [this](std::string* body) { metrics_.AppendTo(body); }, [] { return std::string("ok\n"); }));
  }
  int port() const { return endpoint_ ? endpoint_->port() : 0; }
  void Close() {
    py::gil_scoped_release nogil;  // a request being answered finishes first
    endpoint_.reset();
  }

 private:
  std::vector<py::object> owners_;
  ProcessMetrics metrics_;
  std::unique_ptr<http::MetricsEndpoint> endpoint_;  // destroyed first: stops reading the rest
};

ChunkTransfer MakeTransfer(const PyPagedKvCache& cache, const Int32Array& table, uint32_t chunk_tokens,
                           uint64_t first_chunk, uint64_t num_chunks, uint64_t keep_below, const py::object& staging) {
  python::RawBuffer b = ResolveBuffer(staging, true);
  const uint64_t need = num_chunks * cache.cache.layout.packed_chunk_bytes(chunk_tokens);
  if (b.bytes < need) Raise(InvalidArgument("staging holds " + std::to_string(b.bytes) + " B, " + std::to_string(num_chunks) +
                                           " chunks need " + std::to_string(need) + " B"));
  ChunkTransfer t;
  t.cache = &cache.cache;
  t.block_table = Span(table);
  t.chunk_tokens = chunk_tokens;
  t.first_chunk = first_chunk;
  t.num_chunks = num_chunks;
  t.keep_tokens_below = keep_below;
  t.staging = b.data;
  return t;
}

}  // namespace

extern "C" const char* kvpool_version();  // python_core.cc

PYBIND11_MODULE(kvpool, m) {
  m.doc() = "kvpool: shared KV-cache pool client and engine-side KV connector";
  m.attr("__version__") = kvpool_version();
  g_error = py::exception<std::runtime_error>(m, "Error", PyExc_RuntimeError);
  m.attr("cuda_device_count") = py::cpp_function([] { return CudaDeviceCount(); });

  py::class_<LocalPool>(m, "LocalPool", "A master (of pool part `part`) and one storage service inside this process.")
      .def(py::init<uint64_t, uint64_t, bool, uint32_t>(), py::arg("memory_bytes") = uint64_t{256} << 20,
           py::arg("lease_ms") = 5000, py::arg("huge_pages") = false, py::arg("part") = 0)
      .def_property_readonly("address", &LocalPool::address)
      .def("close", &LocalPool::Close)
      .def("__enter__", [](LocalPool& p) -> LocalPool& { return p; })
      .def("__exit__", [](LocalPool& p, py::args) { p.Close(); });

  py::class_<client::Client>(m, "Client")
      .def(py::init([](const std::string& pool, uint64_t rpc_timeout_ms, bool allow_shm, int shm_copy_threads) {
             client::ClientOptions o;
             o.pool = Take(client::ParsePoolSpec(pool));
             o.rpc_timeout = std::chrono::milliseconds(rpc_timeout_ms);
             o.transfer.allow_shm = allow_shm;
             o.transfer.shm_copy_threads = shm_copy_threads;
             return Take(client::Client::Connect(o));
           }),
           py::arg("pool"), py::arg("rpc_timeout_ms") = 5000, py::arg("allow_shm") = true,
           py::arg("shm_copy_threads") = 2)
      .def("put",
           [](client::Client& c, const std::string& key, const py::object& value, const std::string& group) {
             python::RawBuffer b = ResolveBuffer(value, false);
             client::PutOptions o;
             o.group = group;
             py::gil_scoped_release nogil;
             Status s = c.Put(key, client::ValueView(b.data, b.bytes), o);
             py::gil_scoped_acquire gil;
             Check(s);
           },
           py::arg("key"), py::arg("value"), py::arg("group") = "")
      .def("get",
           [](client::Client& c, const std::string& key) {
             Result<std::string> r = [&] {
               py::gil_scoped_release nogil;
               return c.Get(key);
             }();
             return py::bytes(Take(std::move(r)));
           })
      .def("get_into",
           [](client::Client& c, const std::string& key, const py::object& buffer) {
             python::RawBuffer b = ResolveBuffer(buffer, true);
             Result<uint64_t> r = [&] {
               py::gil_scoped_release nogil;
               return c.GetInto(key, client::ValueBuffer(b.data, b.bytes));
             }();
             return Take(std::move(r));
           })
      .def("exists", [](client::Client& c, const std::string& key) { return Take(c.Exists(key)); })
      .def("remove", [](client::Client& c, const std::string& key) { Check(c.Remove(key)); })
      .def("register_buffer",
           [](client::Client& c, const py::object& buffer) {
             python::RawBuffer b = ResolveBuffer(buffer, true);
             Check(c.RegisterBuffer(b.data, b.bytes));
           })
      .def("stat", [](client::Client& c) {
        client::PoolStats s = Take(c.Stat());
        py::dict d;
        d["objects"] = s.objects;
        d["used_bytes"] = s.used_bytes;
        d["capacity_bytes"] = s.capacity_bytes;
        d["evicted_objects"] = s.evicted_objects;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["segments"] = s.segments.size();
        py::list parts;
        for (const client::PartStats& part : s.parts) {
          py::dict pd;
          pd["part"] = part.part;
          pd["master"] = part.master_address;
          pd["error"] = part.status.ok() ? py::object(py::none()) : py::object(py::str(part.status.ToString()));
          pd["objects"] = part.objects;
          pd["used_bytes"] = part.used_bytes;
          pd["capacity_bytes"] = part.capacity_bytes;
          parts.append(pd);
        }
        d["parts"] = parts;
        return d;
      });

  py::class_<KvModelSpec>(m, "KvModelSpec")
      .def(py::init([](std::string model_id, std::string kv_dtype, std::string layout, uint32_t bytes,
                       std::vector<uint32_t> stage_layers, uint32_t block_tokens, uint32_t chunk_tokens) {
             KvModelSpec s;
             s.model_id = std::move(model_id);
             s.kv_dtype = std::move(kv_dtype);
             if (layout == "latent") {
               s.layout = KvLayoutKind::kLatent;
             } else if (layout == "split_kv") {
               s.layout = KvLayoutKind::kSplitKv;
             } else {
               Raise(InvalidArgument("layout must be 'latent' (MLA) or 'split_kv' (K and V apart), got '" + layout + "'"));
             }
             s.bytes_per_token_per_layer = bytes;
             s.stage_layers = std::move(stage_layers);
             s.block_tokens = block_tokens;
             s.chunk_tokens = chunk_tokens;
             Check(s.Validate());
             return s;
           }),
           py::arg("model_id"), py::arg("kv_dtype"), py::arg("layout"), py::arg("bytes_per_token_per_layer"),
           py::arg("stage_layers"), py::arg("block_tokens") = 16, py::arg("chunk_tokens") = 256)
      .def_readonly("model_id", &KvModelSpec::model_id)
      .def_readonly("stage_layers", &KvModelSpec::stage_layers)
      .def_readonly("bytes_per_token_per_layer", &KvModelSpec::bytes_per_token_per_layer)
      .def_readonly("block_tokens", &KvModelSpec::block_tokens)
      .def_readonly("chunk_tokens", &KvModelSpec::chunk_tokens)
      .def_property_readonly("num_stages", &KvModelSpec::num_stages)
      .def("stage_object_bytes", &KvModelSpec::stage_object_bytes)
      .def_property_readonly("namespace", [](const KvModelSpec& s) { return Take(KvNamespace::Create(s)).hex(); });

  m.def("chunk_keys",
        [](const KvModelSpec& spec, const Int32Array& tokens) {
          KvNamespace ns = Take(KvNamespace::Create(spec));
          std::vector<std::string> out;
          for (const ChunkKey& k : ChainChunkKeys(ns, Span(tokens))) out.push_back(k.hex());
          return out;
        },
        "Hex keys of every full chunk of `tokens` (a partial tail has none).");
  m.def("stage_object_key", [](const KvModelSpec& spec, const std::string& chunk_hex, uint32_t stage) {
    return Take(KvNamespace::Create(spec)).hex() + "/" + chunk_hex + "/s" + std::to_string(stage);
  });

  py::class_<PyPagedKvCache>(m, "PagedKvCache",
                             "One stage's paged KV cache over caller-owned plane buffers (kept alive).")
      .def(py::init(&MakeCache), py::arg("spec"), py::arg("stage"), py::arg("planes"),
           py::arg("block_stride_bytes") = 0)
      .def_property_readonly("num_blocks", [](const PyPagedKvCache& c) { return c.cache.num_blocks; })
      .def_property_readonly("cuda_device", [](const PyPagedKvCache& c) { return c.cuda_device; })
      .def("packed_chunk_bytes",
           [](const PyPagedKvCache& c, uint32_t chunk_tokens) { return c.cache.layout.packed_chunk_bytes(chunk_tokens); },
           py::arg("chunk_tokens"));

  py::class_<ChunkPacker>(m, "ChunkPacker", "Pack/unpack chunks between a paged cache and staging memory.")
      .def(py::init([](int device) {
             if (device < 0) return NewCpuChunkPacker();
             return Take(NewCudaChunkPacker(device));
           }),
           py::arg("device") = -1)
      .def_property_readonly("name", &ChunkPacker::name)
      .def("pack",
           [](ChunkPacker& p, const PyPagedKvCache& cache, const Int32Array& table, uint32_t chunk_tokens,
              uint64_t first_chunk, uint64_t num_chunks, const py::object& staging) {
             ChunkTransfer t = MakeTransfer(cache, table, chunk_tokens, first_chunk, num_chunks, 0, staging);
             py::gil_scoped_release nogil;
             Status s = p.Pack(t);
             if (s.ok()) s = p.Wait();
             py::gil_scoped_acquire gil;
             Check(s);
           },
           py::arg("cache"), py::arg("block_table"), py::arg("chunk_tokens"), py::arg("first_chunk"),
           py::arg("num_chunks"), py::arg("staging"))
      .def("unpack",
           [](ChunkPacker& p, const PyPagedKvCache& cache, const Int32Array& table, uint32_t chunk_tokens,
              uint64_t first_chunk, uint64_t num_chunks, const py::object& staging, uint64_t keep_tokens_below) {
             ChunkTransfer t =
                 MakeTransfer(cache, table, chunk_tokens, first_chunk, num_chunks, keep_tokens_below, staging);
             py::gil_scoped_release nogil;
             Status s = p.Unpack(t);
             if (s.ok()) s = p.Wait();
             py::gil_scoped_acquire gil;
             Check(s);
           },
           py::arg("cache"), py::arg("block_table"), py::arg("chunk_tokens"), py::arg("first_chunk"),
           py::arg("num_chunks"), py::arg("staging"), py::arg("keep_tokens_below") = 0);

  py::class_<PrefixHit>(m, "PrefixHit")
      .def_readonly("first_chunk", &PrefixHit::first_chunk)
      .def_readonly("hit_chunks", &PrefixHit::hit_chunks)
      .def_readonly("gpu_cached_tokens", &PrefixHit::gpu_cached_tokens)
      .def_property_readonly("end_token", &PrefixHit::end_token)
      .def_property_readonly("restorable_tokens", &PrefixHit::restorable_tokens)
      .def_property_readonly("full_chunks", [](const PrefixHit& h) { return h.chunk_keys.size(); });

  py::class_<PyConnector>(m, "Connector",
                          "Engine-side connector: lookup, async restore into and save from paged KV caches.")
      .def(py::init<client::Client*, const KvModelSpec&, std::vector<PyPagedKvCache>, uint64_t, uint32_t, uint64_t,
                    size_t>(),
           py::arg("client"), py::arg("spec"), py::arg("stages"), py::arg("restore_timeout_ms") = 5000,
           py::arg("restore_workers_per_stage") = 2, py::arg("staging_bytes_per_stage") = uint64_t{64} << 20,
           py::arg("max_pending_saves") = 64, py::keep_alive<1, 2>())
      .def_property_readonly("namespace", [](const PyConnector& c) { return c.ns().hex(); })
      .def("lookup", &PyConnector::Lookup, py::arg("tokens"), py::arg("gpu_cached_tokens") = 0,
           "One master round trip: the longest run of chunks beyond the GPU-cached tokens every stage holds (leased).")
      .def("start_restore", &PyConnector::StartRestore, py::arg("request_id"), py::arg("hit"),
           py::arg("block_tables"))
      .def("poll_restore", &PyConnector::PollRestore, py::arg("request_id"))
      .def("wait_restore", &PyConnector::WaitRestore, py::arg("request_id"), py::arg("timeout_ms") = 60000,
           "The restore's outcome; status NOT_READY when it is still running after timeout_ms (wait again).")
      .def("save", &PyConnector::Save, py::arg("request_id"), py::arg("tokens"), py::arg("block_tables"),
           py::arg("first_chunk") = 0)
      .def("poll_save", &PyConnector::PollSave, py::arg("request_id"))
      .def("wait_save", &PyConnector::WaitSave, py::arg("request_id"), py::arg("timeout_ms") = 60000,
           "The save's outcome; status NOT_READY when it is still running after timeout_ms (wait again).")
      .def("metrics", &PyConnector::Metrics);

  m.def(
      "metrics_text",
      [](const std::vector<PyConnector*>& connectors, const std::vector<client::Client*>& clients) {
        std::string text;
        ProcessMetrics(connectors, clients).AppendTo(&text);
        return text;
      },
      py::arg("connectors") = std::vector<PyConnector*>{}, py::arg("clients") = std::vector<client::Client*>{},
      "Prometheus text of these connectors (counters, lookup and restore latency histograms, summed) and of "
      "these clients' transfer request sizes: for a process that serves its own /metrics.");
  py::class_<MetricsServer>(m, "MetricsServer",
                            "Serves metrics_text(connectors, clients) on /metrics and 'ok' on /health at `listen` "
                            "(HOST:PORT, port 0 picks one) until close().")
      .def(py::init<const std::string&, const py::list&, const py::list&>(), py::arg("listen"),
           py::arg("connectors") = py::list(), py::arg("clients") = py::list())
      .def_property_readonly("port", &MetricsServer::port)
      .def("close", &MetricsServer::Close)
      .def("__enter__", [](MetricsServer& s) -> MetricsServer& { return s; })
      .def("__exit__", [](MetricsServer& s, py::args) { s.Close(); });
}
