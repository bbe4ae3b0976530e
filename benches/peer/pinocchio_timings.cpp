// Pinocchio C++ peer of `vidyn_timings`: same state file, same timing method, same JSON
// lines. Built by build.sh in two variants:
//   - "wheel":  -O3, PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION, linked against the
//               libpinocchio_default shared library of the `pin` wheel (what Python users run);
//   - "native": -O3 -march=native, header-only (every template instantiated here).
//
// Usage: pinocchio_timings --model MODEL.bin --states STATES.bin --robot NAME
//            [--variant NAME] [--passes N] [--min-time SECONDS] [--algos LIST] [--limit N]
//            [--check K] [--check-tensors K2]
//
// Algorithms: fk, rnea, aba, crba, crba_upper, minverse (see below), and the derivatives
//   rnea_d        computeRNEADerivatives(model, data, q, v, a) + copy of M's upper triangle
//                 into the lower one (Pinocchio fills only the upper triangle of data.M,
//                 vidyn returns M in full), as for crba;
//   rnea_d_upper  computeRNEADerivatives alone (M upper triangle only);
//   aba_d         computeABADerivatives(model, data, q, v, tau): ddq_dq, ddq_dv and Minv; Pinocchio
//                 already symmetrises Minv inside the call (and so does vidyn), nothing added;
//   rnea_so       ComputeRNEASecondOrderDerivatives(model, data, q, v, a, d2tau_dqdq, d2tau_dvdv,
//                 dtau_dqdv, dtau_dadq) into data's four tensors, zeroed once before the timing:
//                 the algorithm assigns the same structurally non-zero entries on every call,
//                 so this is the same work as vidyn's rnea_second_order, which does not clear
//                 its tensors either (checked by --check on states that follow another one);
//   rnea_so_zero  the documented 5-argument overload ComputeRNEASecondOrderDerivatives(model,
//                 data, q, v, a), which setZero()s the four nv^3 tensors before every call.
// The wheel has no explicit instantiation of the second-order derivatives: they are compiled
// here from the headers (like computeMinverse), at the harness's flags.
// --limit N times only the first N states. --check K prints the results of the first K states
// for the algorithms of --algos that have a check (rnea, aba, crba, minverse, rnea_d, aba_d,
// rnea_so), tensors (C order, entry (i, j, k) read with Eigen::Tensor::operator()) only for the
// first K2 states.
//
// MODEL.bin is written by pinocchio's Python API (`model.saveToBinary`), so the model timed
// here is exactly the one the driver built. The state file format is documented in
// benches/src/lib.rs (magic "VDYNST01", u64 nq, nv, count, then f64 q, v, a, tau).
//
// Timing (identical to vidyn_timings): one warm-up pass over the pool, then P passes
// (P >= --passes, more while the total is under --min-time); each pass calls the algorithm
// once per pooled state in order and records elapsed / count. Reported: median, min, max of
// the per-pass means in ns.
//
// CRBA and computeMinverse fill only the upper triangle in Pinocchio; vidyn returns the full
// symmetric matrix, so the timed region here includes copying the strict upper triangle into
// the lower one (`M.triangularView<StrictlyLower>() = M.transpose()`), as a caller who needs
// the full matrix must. `crba_upper` (upper triangle only) is reported as well.

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/rnea-second-order-derivatives.hpp>
#include <pinocchio/serialization.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef VARIANT_NAME
#define VARIANT_NAME "unknown"
#endif

namespace
{
  template<typename T>
  inline void escape(const T * p)
  {
    asm volatile("" : : "g"(p) : "memory");
  }

  struct States
  {
    std::size_t nq = 0, nv = 0, count = 0;
    std::vector<Eigen::VectorXd> q, v, a, tau;
  };

  std::uint64_t read_u64(std::ifstream & f)
  {
    std::uint64_t x = 0;
    f.read(reinterpret_cast<char *>(&x), sizeof x);
    return x;
  }

  void read_block(std::ifstream & f, std::vector<Eigen::VectorXd> & out, std::size_t count, std::size_t dim)
  {
    out.assign(count, Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dim)));
    for (std::size_t k = 0; k < count; ++k)
      f.read(reinterpret_cast<char *>(out[k].data()), static_cast<std::streamsize>(dim * sizeof(double)));
  }

  States read_states(const std::string & path)
  {
    std::ifstream f(path, std::ios::binary);
    if (!f)
      throw std::runtime_error("cannot open state file " + path);
    char magic[8];
    f.read(magic, 8);
    if (std::memcmp(magic, "VDYNST01", 8) != 0)
      throw std::runtime_error("bad magic in state file " + path);
    States s;
    s.nq = read_u64(f);
    s.nv = read_u64(f);
    s.count = read_u64(f);
    read_block(f, s.q, s.count, s.nq);
    read_block(f, s.v, s.count, s.nv);
    read_block(f, s.a, s.count, s.nv);
    read_block(f, s.tau, s.count, s.nv);
    if (!f)
      throw std::runtime_error("state file " + path + " is truncated");
    return s;
  }

  struct Timing
  {
    double median, min, max;
    std::size_t passes;
  };

  template<typename F>
  Timing time_passes(std::size_t count, std::size_t min_passes, double min_time, F && call)
  {
    using clock = std::chrono::steady_clock;
    for (std::size_t k = 0; k < count; ++k) // warm-up
      call(k);
    std::vector<double> per_call;
    double total = 0.0;
    while (per_call.size() < min_passes || (total < min_time && per_call.size() < 10001))
    {
      const auto t0 = clock::now();
      for (std::size_t k = 0; k < count; ++k)
        call(k);
      const double dt = std::chrono::duration<double>(clock::now() - t0).count();
      total += dt;
      per_call.push_back(dt * 1e9 / static_cast<double>(count));
    }
    std::vector<double> sorted = per_call;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    return {median, sorted.front(), sorted.back(), n};
  }

  void print_vector(std::ostream & os, const double * x, std::size_t n)
  {
    os << "[";
    for (std::size_t i = 0; i < n; ++i)
    {
      if (i)
        os << ",";
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", x[i]);
      os << buf;
    }
    os << "]";
  }

  void fill_lower(Eigen::MatrixXd & m)
  {
    m.triangularView<Eigen::StrictlyLower>() = m.transpose();
  }

  void fill_lower(pinocchio::Data::RowMatrixXs & m)
  {
    m.triangularView<Eigen::StrictlyLower>() = m.transpose();
  }

  void second_order_no_zero(
    const pinocchio::Model & model, pinocchio::Data & data, const Eigen::VectorXd & q, const Eigen::VectorXd & v,
    const Eigen::VectorXd & a)
  {
    pinocchio::ComputeRNEASecondOrderDerivatives(
      model, data, q, v, a, data.d2tau_dqdq, data.d2tau_dvdv, data.d2tau_dqdv, data.d2tau_dadq);
  }
} // namespace

int main(int argc, char ** argv)
{
  std::string model_path, states_path, robot = "robot", variant = VARIANT_NAME;
  std::string algos = "fk,rnea,aba,crba,crba_upper,minverse";
  std::size_t passes = 21, check = 0, limit = static_cast<std::size_t>(-1), check_tensors = static_cast<std::size_t>(-1);
  double min_time = 0.3;
  for (int i = 1; i < argc; ++i)
  {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::runtime_error("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--model")
      model_path = next();
    else if (arg == "--states")
      states_path = next();
    else if (arg == "--robot")
      robot = next();
    else if (arg == "--variant")
      variant = next();
    else if (arg == "--passes")
      passes = std::stoul(next());
    else if (arg == "--min-time")
      min_time = std::stod(next());
    else if (arg == "--algos")
      algos = next();
    else if (arg == "--limit")
      limit = std::stoul(next());
    else if (arg == "--check")
      check = std::stoul(next());
    else if (arg == "--check-tensors")
      check_tensors = std::stoul(next());
    else
    {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (model_path.empty() || states_path.empty())
  {
    std::cerr << "usage: pinocchio_timings --model MODEL.bin --states STATES.bin --robot NAME [--variant V] "
                 "[--passes N] [--min-time S] [--algos LIST] [--limit N] [--check K] [--check-tensors K2]\n";
    return 2;
  }

  pinocchio::Model model;
  model.loadFromBinary(model_path);
  pinocchio::Data data(model);
  const States s = read_states(states_path);
  if (s.nq != static_cast<std::size_t>(model.nq) || s.nv != static_cast<std::size_t>(model.nv))
  {
    std::cerr << "state file has nq=" << s.nq << " nv=" << s.nv << ", model has nq=" << model.nq << " nv=" << model.nv << "\n";
    return 1;
  }
  const std::size_t nv = s.nv;

  std::vector<std::string> algo_list;
  {
    std::stringstream list(algos);
    std::string a;
    while (std::getline(list, a, ','))
      if (!a.empty())
        algo_list.push_back(a);
  }
  auto wants = [&](const char * name) {
    return std::find(algo_list.begin(), algo_list.end(), name) != algo_list.end();
  };
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  if (check > 0)
  {
    const std::size_t K = std::min(check, s.count);
    const std::size_t KT = std::min(check_tensors, K);
    std::vector<double> buf;
    if (wants("rnea_so"))
    { // stale entries from another state, as in the timing loop
      data.d2tau_dqdq.setZero();
      data.d2tau_dvdv.setZero();
      data.d2tau_dqdv.setZero();
      data.d2tau_dadq.setZero();
      second_order_no_zero(model, data, s.q[s.count - 1], s.v[s.count - 1], s.a[s.count - 1]);
    }
    for (std::size_t k = 0; k < K; ++k)
    {
      auto emit = [&](const char * algo, const double * x, std::size_t n) {
        std::ostringstream os;
        os << "{\"lib\":\"pinocchio\",\"variant\":\"" << variant << "\",\"robot\":\"" << robot << "\",\"check\":\"" << algo
           << "\",\"state\":" << k << ",\"values\":";
        print_vector(os, x, n);
        os << "}";
        std::cout << os.str() << "\n";
      };
      auto emit_matrix = [&](const char * algo, const auto & m) {
        const RowMatrix r = m;
        emit(algo, r.data(), nv * nv);
      };
      auto emit_tensor = [&](const char * algo, const auto & t) {
        buf.resize(nv * nv * nv);
        std::size_t at = 0;
        for (Eigen::Index i = 0; i < static_cast<Eigen::Index>(nv); ++i)
          for (Eigen::Index j = 0; j < static_cast<Eigen::Index>(nv); ++j)
            for (Eigen::Index l = 0; l < static_cast<Eigen::Index>(nv); ++l)
              buf[at++] = t(i, j, l);
        emit(algo, buf.data(), buf.size());
      };
      if (wants("rnea"))
      {
        pinocchio::rnea(model, data, s.q[k], s.v[k], s.a[k]);
        emit("rnea", data.tau.data(), nv);
      }
      if (wants("aba"))
      {
        pinocchio::aba(model, data, s.q[k], s.v[k], s.tau[k]);
        emit("aba", data.ddq.data(), nv);
      }
      if (wants("crba"))
      {
        pinocchio::crba(model, data, s.q[k]);
        fill_lower(data.M);
        emit_matrix("crba", data.M);
      }
      if (wants("minverse"))
      {
        pinocchio::computeMinverse(model, data, s.q[k]);
        fill_lower(data.Minv);
        emit_matrix("minverse", data.Minv);
      }
      if (wants("rnea_d"))
      {
        pinocchio::computeRNEADerivatives(model, data, s.q[k], s.v[k], s.a[k]);
        fill_lower(data.M);
        emit_matrix("rnea_d:dtau_dq", data.dtau_dq);
        emit_matrix("rnea_d:dtau_dv", data.dtau_dv);
        emit_matrix("rnea_d:dtau_da", data.M);
      }
      if (wants("aba_d"))
      {
        pinocchio::computeABADerivatives(model, data, s.q[k], s.v[k], s.tau[k]);
        emit_matrix("aba_d:ddq_dq", data.ddq_dq);
        emit_matrix("aba_d:ddq_dv", data.ddq_dv);
        emit_matrix("aba_d:ddq_dtau", data.Minv);
      }
      if (wants("rnea_so") && k < KT)
      {
        second_order_no_zero(model, data, s.q[k], s.v[k], s.a[k]);
        emit_tensor("rnea_so:d2tau_dq2", data.d2tau_dqdq);
        emit_tensor("rnea_so:d2tau_dv2", data.d2tau_dvdv);
        emit_tensor("rnea_so:d2tau_dqdv", data.d2tau_dqdv);
        emit_tensor("rnea_so:dm_dq", data.d2tau_dadq);
      }
    }
    std::cout.flush();
    return 0;
  }

  auto report = [&](const std::string & algo, const Timing & t) {
    char buf[512];
    std::snprintf(
      buf, sizeof buf,
      "{\"lib\":\"pinocchio\",\"variant\":\"%s\",\"robot\":\"%s\",\"algo\":\"%s\",\"nq\":%zu,\"nv\":%zu,\"count\":%zu,"
      "\"passes\":%zu,\"median_ns\":%.2f,\"min_ns\":%.2f,\"max_ns\":%.2f}",
      variant.c_str(), robot.c_str(), algo.c_str(), s.nq, s.nv, s.count, t.passes, t.median, t.min, t.max);
    std::cout << buf << std::endl;
  };

  for (const std::string & algo : algo_list)
  {
    const std::size_t n = std::max<std::size_t>(1, std::min(s.count, limit));
    if (algo == "fk")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::forwardKinematics(model, data, s.q[k], s.v[k], s.a[k]);
               escape(data.a.data());
             }));
    else if (algo == "rnea")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               escape(pinocchio::rnea(model, data, s.q[k], s.v[k], s.a[k]).data());
             }));
    else if (algo == "aba")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               escape(pinocchio::aba(model, data, s.q[k], s.v[k], s.tau[k]).data());
             }));
    else if (algo == "crba")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::crba(model, data, s.q[k]);
               fill_lower(data.M);
               escape(data.M.data());
             }));
    else if (algo == "crba_upper")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               escape(pinocchio::crba(model, data, s.q[k]).data());
             }));
    else if (algo == "minverse")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::computeMinverse(model, data, s.q[k]);
               fill_lower(data.Minv);
               escape(data.Minv.data());
             }));
    else if (algo == "rnea_d")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::computeRNEADerivatives(model, data, s.q[k], s.v[k], s.a[k]);
               fill_lower(data.M);
               escape(data.dtau_dq.data());
               escape(data.dtau_dv.data());
               escape(data.M.data());
             }));
    else if (algo == "rnea_d_upper")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::computeRNEADerivatives(model, data, s.q[k], s.v[k], s.a[k]);
               escape(data.dtau_dq.data());
               escape(data.dtau_dv.data());
               escape(data.M.data());
             }));
    else if (algo == "aba_d")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::computeABADerivatives(model, data, s.q[k], s.v[k], s.tau[k]);
               escape(data.ddq_dq.data());
               escape(data.ddq_dv.data());
               escape(data.Minv.data());
             }));
    else if (algo == "rnea_so")
    {
      data.d2tau_dqdq.setZero();
      data.d2tau_dvdv.setZero();
      data.d2tau_dqdv.setZero();
      data.d2tau_dadq.setZero();
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               second_order_no_zero(model, data, s.q[k], s.v[k], s.a[k]);
               escape(data.d2tau_dqdq.data());
               escape(data.d2tau_dvdv.data());
               escape(data.d2tau_dqdv.data());
               escape(data.d2tau_dadq.data());
             }));
    }
    else if (algo == "rnea_so_zero")
      report(algo, time_passes(n, passes, min_time, [&](std::size_t k) {
               pinocchio::ComputeRNEASecondOrderDerivatives(model, data, s.q[k], s.v[k], s.a[k]);
               escape(data.d2tau_dqdq.data());
               escape(data.d2tau_dvdv.data());
               escape(data.d2tau_dqdv.data());
               escape(data.d2tau_dadq.data());
             }));
    else
    {
      std::cerr << "unknown algorithm " << algo << "\n";
      return 2;
    }
  }
  return 0;
}
