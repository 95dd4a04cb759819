//===- tuner.cpp - Warm-up, round-robin samples, early elimination, cross-check ---------------===//
#include "cubecc/autotune/tuner.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cubecc::autotune {

namespace {

double median_of(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

/// Element `i` of a float output, widened to double.
double float_at(const Output &out, size_t i) {
  const uint8_t *p = out.bytes.data() + i * (ir::scalar_bits(out.element) / 8);
  switch (out.element) {
  case ir::Scalar::F16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return ir::f16_bits_to_float(h);
  }
  case ir::Scalar::BF16: {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return ir::bf16_bits_to_float(b);
  }
  case ir::Scalar::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  default: {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  }
}

/// Element `i` of an integer or bool output, as text.
std::string integer_at(const Output &out, size_t i) {
  const size_t bytes = std::max<size_t>(ir::scalar_bits(out.element) / 8, 1);
  uint64_t bits = 0;
  std::memcpy(&bits, out.bytes.data() + i * bytes, bytes); // little-endian hosts only
  if (ir::is_signed(out.element) && bytes < 8 && (bits >> (bytes * 8 - 1)) & 1)
    bits |= ~uint64_t{0} << (bytes * 8);
  return ir::is_signed(out.element) ? fmt::format("{}", static_cast<int64_t>(bits))
                                    : fmt::format("{}", bits);
}

} // namespace

std::string compare_outputs(const std::vector<Output> &a, const std::vector<Output> &b,
                            double relative_tolerance, double absolute_tolerance) {
  if (a.size() != b.size())
    return fmt::format("{} outputs vs {}", a.size(), b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o].element != b[o].element || a[o].bytes.size() != b[o].bytes.size())
      return fmt::format("output {}: {} bytes of {} vs {} bytes of {}", o, a[o].bytes.size(),
                         ir::scalar_name(a[o].element), b[o].bytes.size(),
                         ir::scalar_name(b[o].element));
    const size_t element_bytes = std::max<size_t>(ir::scalar_bits(a[o].element) / 8, 1);
    const size_t count = a[o].bytes.size() / element_bytes;
    for (size_t i = 0; i < count; ++i) {
      if (ir::is_float(a[o].element)) {
        double x = float_at(a[o], i), y = float_at(b[o], i);
        if (x == y || (std::isnan(x) && std::isnan(y)))
          continue;
        double diff = std::fabs(x - y);
        if (diff <= absolute_tolerance ||
            diff <= relative_tolerance * std::max(std::fabs(x), std::fabs(y)))
          continue;
        return fmt::format("output {} element {}: {} vs {} (relative tolerance {})", o, i, x, y,
                           relative_tolerance);
      }
      if (std::memcmp(a[o].bytes.data() + i * element_bytes, b[o].bytes.data() + i * element_bytes,
                      element_bytes) != 0)
        return fmt::format("output {} element {}: {} vs {} (integers: exact)", o, i,
                           integer_at(a[o], i), integer_at(b[o], i));
    }
  }
  return {};
}

TuningRecord tune(runtime::Runtime &rt, const Tunable &tunable, const Problem &problem,
                  Benchmark &benchmark, const TuneOptions &options) {
  TuningRecord record;
  record.tunable = tunable.name();
  record.bucket = tunable.bucket(problem);
  record.device = device_fingerprint(rt.info());
  record.cubecc_version = std::string(cubecc::version());
  const std::string what = fmt::format("tunable '{}' ({})", tunable.name(), record.bucket);

  const size_t n = tunable.variants().size();
  std::vector<runtime::KernelHandle> kernels(n);
  std::vector<std::vector<double>> samples(n);
  record.timings.resize(n);
  std::vector<size_t> live; // valid and not eliminated, in the tunable's order
  for (size_t i = 0; i < n; ++i) {
    VariantTiming &t = record.timings[i];
    t.configuration = tunable.variants()[i].configuration;
    if (!tunable.valid(i, problem)) {
      t.invalid = true;
      t.note = "not valid for this problem";
      continue;
    }
    try {
      kernels[i] = tunable.variants()[i].load(rt);
    } catch (const runtime::Error &e) {
      // A variant the device cannot run (a workgroup above its limits, a missing feature) is
      // out of the race, and says why.
      t.invalid = true;
      t.note = e.what();
      runtime::log_warning("{}: variant '{}' does not load: {}", what, t.configuration, e.what());
      continue;
    }
    live.push_back(i);
  }
  if (live.empty())
    throw runtime::Error(runtime::ErrorKind::Unsupported,
                         fmt::format("{}: no variant is valid for this problem", what));
  const size_t reference = live.front();

  benchmark.prepare(rt, problem);
  auto timed_run = [&](size_t i) {
    benchmark.run(rt, i, kernels[i]);
    rt.synchronize();
    std::vector<double> times = rt.last_launch_times_ns();
    if (times.empty())
      throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                           fmt::format("{}: a run of variant '{}' launched nothing", what,
                                       record.timings[i].configuration));
    double total = 0;
    for (double ns : times)
      total += ns;
    return total;
  };

  for (uint32_t w = 0; w < options.warmup_runs; ++w)
    for (size_t i : live)
      timed_run(i);
  for (uint32_t round = 0; round < options.samples; ++round) {
    for (size_t i : live)
      samples[i].push_back(timed_run(i));
    if (options.elimination_after == 0 || round + 1 < options.elimination_after || live.size() < 2)
      continue;
    size_t leader = live.front();
    for (size_t i : live)
      if (median_of(samples[i]) < median_of(samples[leader]))
        leader = i;
    const double bar = options.elimination_ratio * median_of(samples[leader]);
    std::erase_if(live, [&](size_t i) {
      double best = *std::min_element(samples[i].begin(), samples[i].end());
      if (i == leader || best <= bar)
        return false;
      record.timings[i].eliminated = true;
      return true;
    });
  }

  for (size_t i = 0; i < n; ++i) {
    VariantTiming &t = record.timings[i];
    t.samples = static_cast<uint32_t>(samples[i].size());
    t.median_ns = median_of(samples[i]);
    t.min_ns = samples[i].empty() ? 0 : *std::min_element(samples[i].begin(), samples[i].end());
  }
  size_t winner = live.front();
  for (size_t i : live)
    if (record.timings[i].median_ns < record.timings[winner].median_ns)
      winner = i;
  record.configuration = record.timings[winner].configuration;

  if (options.cross_check) {
    std::vector<size_t> checked = live;
    if (checked.front() != reference)
      checked.insert(checked.begin(), reference);
    std::vector<Output> expected;
    for (size_t i : checked) {
      benchmark.reset(rt, i);
      benchmark.run(rt, i, kernels[i]);
      rt.synchronize();
      std::vector<Output> got = benchmark.outputs(rt, i);
      if (i == reference) {
        expected = std::move(got);
        if (expected.empty()) {
          runtime::log_debug("{}: the benchmark gives no outputs: not cross-checked", what);
          break;
        }
        continue;
      }
      std::string difference =
          compare_outputs(expected, got, options.relative_tolerance, options.absolute_tolerance);
      if (!difference.empty())
        throw runtime::Error(
            runtime::ErrorKind::InvalidArgument,
            fmt::format("{}: variant '{}' disagrees with variant '{}' (the first valid one): {}",
                        what, record.timings[i].configuration,
                        record.timings[reference].configuration, difference));
    }
  }
  record.created = utc_timestamp();
  return record;
}

} // namespace cubecc::autotune
