// Pinocchio C++ oracle for second-order RNEA derivatives. Pinocchio's Python API has no
// binding of ComputeRNEASecondOrderDerivatives, so tests/test_second_order_oracle.py runs
// this program (built by build_second_order.sh) and compares its tensors with vidyn's.
//
// Usage: pinocchio_second_order MODEL.bin < STATES.txt > OUT.bin
//
// MODEL.bin is the Pinocchio model written by the Python API (`model.saveToBinary`), built
// from the URDF with or without a free-flyer root joint (`pin.buildModelFromUrdf(path[,
// pin.JointModelFreeFlyer()])`): the `pin` wheel ships no urdfdom headers, so the URDF is
// parsed on the Python side, exactly as for the timing harness pinocchio_timings.cpp.
//
// STATES.txt (text, whitespace separated): count, then for each state nq values of q, nv of
// v, nv of a, all in Pinocchio's layout.
//
// OUT.bin (binary, native little-endian): the 8 bytes "PINSO001", u64 nv, u64 count, then for
// each state, as f64: tau = rnea(q, v, a) (nv values, to check that the state was read as
// intended), then the four tensors of ComputeRNEASecondOrderDerivatives in this order:
//   d2tau_dqdq, d2tau_dvdv, dtau_dqdv, dtau_dadq
// each nv^3 values with entry (i, j, k) -- Pinocchio's own tensor indexing T(i, j, k), read
// with Eigen::Tensor::operator() and therefore independent of the tensor's storage order --
// at position (i*nv + j)*nv + k (NumPy C order). No index is permuted here; mapping to
// vidyn's layout, if any, is the test's business.

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/rnea-second-order-derivatives.hpp>
#include <pinocchio/serialization.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace
{
  void write_raw(const void * p, std::size_t bytes)
  {
    if (std::fwrite(p, 1, bytes, stdout) != bytes)
      throw std::runtime_error("short write on stdout");
  }

  template<typename Tensor>
  void write_tensor(const Tensor & t, Eigen::Index nv, std::vector<double> & buf)
  {
    buf.resize(static_cast<std::size_t>(nv * nv * nv));
    std::size_t at = 0;
    for (Eigen::Index i = 0; i < nv; ++i)
      for (Eigen::Index j = 0; j < nv; ++j)
        for (Eigen::Index k = 0; k < nv; ++k)
          buf[at++] = t(i, j, k);
    write_raw(buf.data(), buf.size() * sizeof(double));
  }

  Eigen::VectorXd read_vector(std::istream & in, Eigen::Index n, const char * what)
  {
    Eigen::VectorXd x(n);
    for (Eigen::Index i = 0; i < n; ++i)
      if (!(in >> x[i]))
        throw std::runtime_error(std::string("cannot read ") + what);
    return x;
  }
} // namespace

int main(int argc, char ** argv)
{
  try
  {
    if (argc != 2)
    {
      std::cerr << "usage: " << argv[0] << " MODEL.bin < STATES.txt > OUT.bin\n";
      return 2;
    }
    pinocchio::Model model;
    model.loadFromBinary(argv[1]);
    pinocchio::Data data(model);
    const Eigen::Index nv = model.nv;

    long long count = 0;
    if (!(std::cin >> count) || count < 0)
      throw std::runtime_error("cannot read the state count");
    write_raw("PINSO001", 8);
    const std::uint64_t header[2] = {static_cast<std::uint64_t>(nv), static_cast<std::uint64_t>(count)};
    write_raw(header, sizeof(header));

    std::vector<double> buf;
    for (long long s = 0; s < count; ++s)
    {
      const Eigen::VectorXd q = read_vector(std::cin, model.nq, "q");
      const Eigen::VectorXd v = read_vector(std::cin, nv, "v");
      const Eigen::VectorXd a = read_vector(std::cin, nv, "a");
      const Eigen::VectorXd tau = pinocchio::rnea(model, data, q, v, a);
      write_raw(tau.data(), static_cast<std::size_t>(nv) * sizeof(double));
      // the overload without output arguments zeroes data's tensors before filling them
      pinocchio::ComputeRNEASecondOrderDerivatives(model, data, q, v, a);
      write_tensor(data.d2tau_dqdq, nv, buf);
      write_tensor(data.d2tau_dvdv, nv, buf);
      write_tensor(data.d2tau_dqdv, nv, buf);
      write_tensor(data.d2tau_dadq, nv, buf);
    }
    std::fflush(stdout);
    return 0;
  }
  catch (const std::exception & e)
  {
    std::cerr << "pinocchio_second_order: " << e.what() << "\n";
    return 1;
  }
}
