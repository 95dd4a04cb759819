//===- memory_pool_test.cpp - The memory pool: policies, exact statistics, limits, threads ----===//
//
// Drives runtime/src/memory_pool.h directly over a fake device that hands out host memory and
// counts what is outstanding, so every statistic can be checked exactly and every byte accounted
// for. Needs only GoogleTest and memory_pool.cpp: test/tsan builds this same file under
// ThreadSanitizer.
//
//===-----------------------------------------------------------------------------------------===//
#include "memory_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

namespace cubecc::runtime {
namespace {

/// Host memory behind the Device interface; counts allocations and checks every free.
class HostDevice final : public ImmediateDevice {
public:
  explicit HostDevice(uint64_t capacity = 0) : capacity_(capacity) { info_.backend = "host"; }
  ~HostDevice() override {
    for (auto &[pointer, bytes] : outstanding_)
      std::free(pointer);
  }
  const DeviceInfo &info() const override { return info_; }
  DeviceMemory allocate(uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    if (capacity_ && used_ + bytes > capacity_)
      throw Error(ErrorKind::OutOfMemory, "host: out of memory");
    void *pointer = std::malloc(bytes);
    outstanding_.emplace(pointer, bytes);
    used_ += bytes;
    ++allocations_;
    return {pointer, bytes};
  }
  void free(DeviceMemory memory) override {
    std::lock_guard lock(mutex_);
    auto it = outstanding_.find(memory.handle);
    if (it == outstanding_.end() || it->second != memory.bytes) {
      ++bad_frees_;
      return;
    }
    used_ -= memory.bytes;
    outstanding_.erase(it);
    std::free(memory.handle);
    ++frees_;
  }
  void copy_in(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) override {
    std::memcpy(static_cast<char *>(dst.handle) + offset, src, bytes);
  }
  void copy_out(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) override {
    std::memcpy(dst, static_cast<const char *>(src.handle) + offset, bytes);
  }
  std::unique_ptr<CompiledKernel> compile(const ir::Kernel &) override {
    throw Error(ErrorKind::Unsupported, "host: no kernels");
  }
  std::vector<BinaryTarget> binary_targets() const override { return {}; }
  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &) override {
    throw Error(ErrorKind::Unsupported, "host: no kernels");
  }
  void run_launch(const CompiledKernel &, std::array<uint32_t, 3>,
                  std::span<const LaunchArg>) override {
    throw Error(ErrorKind::Unsupported, "host: no kernels");
  }

  uint64_t used() const {
    std::lock_guard lock(mutex_);
    return used_;
  }
  size_t outstanding() const {
    std::lock_guard lock(mutex_);
    return outstanding_.size();
  }
  uint64_t allocations() const { return allocations_; }
  uint64_t frees() const { return frees_; }
  uint64_t bad_frees() const { return bad_frees_; }

private:
  DeviceInfo info_;
  uint64_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<void *, uint64_t> outstanding_;
  uint64_t used_ = 0, allocations_ = 0, frees_ = 0, bad_frees_ = 0;
};

struct Fixture {
  explicit Fixture(PoolOptions options = {}, uint64_t capacity = 0)
      : device(std::make_shared<HostDevice>(capacity)),
        pool(std::make_shared<MemoryPool>(device, options)) {}
  std::shared_ptr<HostDevice> device;
  std::shared_ptr<MemoryPool> pool;
};

TEST(MemoryPoolClasses, fine_classes_round_by_at_most_an_eighth_and_exact_ones_to_256_bytes) {
  EXPECT_EQ(MemoryPool::fine_class_bytes(1), 256u);
  EXPECT_EQ(MemoryPool::fine_class_bytes(257), 512u);
  EXPECT_EQ(MemoryPool::fine_class_bytes(4200), 4608u);           // 8 KiB / 16 = 512-byte steps
  EXPECT_EQ(MemoryPool::fine_class_bytes(3'000'000), 3'145'728u); // 256 KiB steps
  for (uint64_t bytes = 2049; bytes < (1u << 24); bytes = bytes * 3 / 2 + 7)
    EXPECT_LE(MemoryPool::fine_class_bytes(bytes) - bytes, bytes / 8) << bytes;
  EXPECT_EQ(MemoryPool::exact_class_bytes(4200), 4352u);
  EXPECT_EQ(MemoryPool::exact_class_bytes(0), 256u);
  EXPECT_EQ(MemoryPool::power_of_two_bytes(4200), 8192u);
}

// Every step of this trace is worked out in the comments; the statistics must match exactly.
TEST(MemoryPoolStatistics, are_exact_on_a_scripted_trace) {
  Fixture f;
  MemoryPool &pool = *f.pool;
  DeviceMemory a = pool.acquire(4200); // first 4200: fine class 4608, device allocation 1
  DeviceMemory b = pool.acquire(100);  // 256, device allocation 2
  EXPECT_EQ(a.bytes, 4608u);
  EXPECT_EQ(b.bytes, 256u);
  pool.release(a);                     // 4200 seen once: cached
  DeviceMemory c = pool.acquire(4200); // now recurring (exact class 4352), but the cached 4608
  EXPECT_EQ(c.handle, a.handle);       // block covers it within a fine class: a hit
  PoolStatistics s = pool.statistics();
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_EQ(s.bytes_requested, 4300u);
  EXPECT_EQ(s.bytes_live, 4864u);
  EXPECT_EQ(s.bytes_cached, 0u);
  pool.release(c);                     // a generic block of a recurring size: back to the device
  DeviceMemory d = pool.acquire(4200); // exact class: device allocation 3
  DeviceMemory e = pool.acquire(4200); // device allocation 4
  EXPECT_EQ(d.bytes, 4352u);
  EXPECT_EQ(e.bytes, 4352u);
  s = pool.statistics();
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(s.bytes_requested, 8500u);
  EXPECT_EQ(s.bytes_live, 8960u);
  EXPECT_EQ(s.bytes_reserved, 8960u);
  EXPECT_EQ(s.waste_bytes(), 460u);
  pool.release(d);
  pool.release(e); // both cached: 8704 bytes
  EXPECT_EQ(pool.statistics().bytes_cached, 8704u);
  // 8500 bytes, seen once: fine class 9216, nothing cached covers it. Reserved would be
  // 256 + 8704 + 9216 = 18176 > 1.125 x 8600 (the requested bytes then) = 9675, so the two
  // cached 4352 blocks go back first, oldest first.
  DeviceMemory g = pool.acquire(8500);
  EXPECT_EQ(g.bytes, 9216u);
  s = pool.statistics();
  EXPECT_EQ(s.device_frees, 3u);
  EXPECT_EQ(s.bytes_reserved, 9472u);
  pool.release(g);
  pool.release(b);
  pool.trim();

  s = pool.statistics();
  EXPECT_EQ(s.allocations, 6u);
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 1.0 / 6);
  EXPECT_EQ(s.device_allocations, 5u);
  EXPECT_EQ(s.device_frees, 5u);
  EXPECT_EQ(s.bytes_requested, 0u);
  EXPECT_EQ(s.bytes_live, 0u);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.bytes_reserved, 0u);
  EXPECT_EQ(s.peak_bytes_requested, 8600u);
  EXPECT_EQ(s.peak_bytes_live, 9472u);
  EXPECT_EQ(s.peak_bytes_reserved, 9472u);
  EXPECT_EQ(s.size_classes, 4u); // 4608, 256, 4352, 9216
  EXPECT_EQ(f.device->allocations(), 5u);
  EXPECT_EQ(f.device->frees(), 5u);
  EXPECT_EQ(f.device->outstanding(), 0u);
}

TEST(MemoryPoolStatistics, are_exact_for_power_of_two_buckets) {
  Fixture f({.policy = PoolPolicy::PowerOfTwo});
  MemoryPool &pool = *f.pool;
  DeviceMemory a = pool.acquire(4200);
  EXPECT_EQ(a.bytes, 8192u);
  pool.release(a);
  DeviceMemory b = pool.acquire(5000); // the same bucket: a hit
  DeviceMemory c = pool.acquire(3000); // 4096: a new block
  EXPECT_EQ(b.handle, a.handle);
  PoolStatistics s = pool.statistics();
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_EQ(s.device_allocations, 2u);
  EXPECT_EQ(s.bytes_requested, 8000u);
  EXPECT_EQ(s.bytes_live, 12288u);
  EXPECT_EQ(s.peak_bytes_reserved, 12288u);
  EXPECT_EQ(s.size_classes, 2u);
  pool.release(b);
  pool.release(c);
  s = pool.statistics();
  EXPECT_EQ(s.bytes_cached, 12288u);
  EXPECT_EQ(s.waste_bytes(), 12288u);
  EXPECT_DOUBLE_EQ(s.peak_reserved_ratio(), 12288.0 / 8000);
}

TEST(MemoryPoolAdaptation, a_recurring_size_that_is_no_power_of_two_gets_an_exact_class) {
  Fixture adaptive;
  Fixture buckets({.policy = PoolPolicy::PowerOfTwo});
  const uint64_t bytes = 1'234'567; // rounded to 256: 1,234,688
  for (Fixture *f : {&adaptive, &buckets})
    for (int step = 0; step < 50; ++step) {
      DeviceMemory x = f->pool->acquire(bytes), y = f->pool->acquire(bytes);
      f->pool->release(x);
      f->pool->release(y);
    }
  // Round 1: x gets the fine class (1,310,720), y (the size now recurring) the exact one; x's
  // generic block goes back. Round 2 allocates the second exact block; nothing after that.
  PoolStatistics s = adaptive.pool->statistics();
  EXPECT_EQ(s.peak_bytes_reserved, 1'310'720u + 1'234'688u);
  EXPECT_LT(s.peak_reserved_ratio(), 1.035);
  EXPECT_EQ(s.device_allocations, 3u);
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(s.reuses, 97u);
  EXPECT_EQ(s.bytes_cached, 2 * 1'234'688u); // the steady state: exact blocks only
  PoolStatistics p = buckets.pool->statistics();
  EXPECT_EQ(p.peak_bytes_reserved, 2 * 2'097'152u);
  EXPECT_EQ(p.reuses, 98u);
}

TEST(MemoryPoolLimits, cached_bytes_stay_under_the_cap_oldest_freed_first) {
  Fixture f({.max_cached_bytes = 3 * 1024, .max_reserved_ratio = 0});
  std::vector<DeviceMemory> blocks;
  for (int i = 0; i < 4; ++i)
    blocks.push_back(f.pool->acquire(1024));
  for (DeviceMemory &block : blocks)
    f.pool->release(block); // the fourth pushes the first out
  PoolStatistics s = f.pool->statistics();
  EXPECT_EQ(s.bytes_cached, 3 * 1024u);
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(f.device->used(), 3 * 1024u);
  DeviceMemory big = f.pool->acquire(8192); // more than the cap: never cached
  f.pool->release(big);
  EXPECT_EQ(f.pool->statistics().bytes_cached, 3 * 1024u);
  EXPECT_EQ(f.device->used(), 3 * 1024u);
}

TEST(MemoryPoolLimits, a_block_idle_for_more_allocations_than_the_limit_goes_back) {
  Fixture f({.idle_release_allocations = 3});
  f.pool->release(f.pool->acquire(10'000)); // cached at allocation 1
  for (int i = 0; i < 3; ++i)               // allocations 2..4: idle 3, still cached
    f.pool->release(f.pool->acquire(300));
  EXPECT_EQ(f.pool->statistics().bytes_cached, 10'240u + 512u);
  f.pool->release(f.pool->acquire(300)); // allocation 5: idle 4 > 3
  PoolStatistics s = f.pool->statistics();
  EXPECT_EQ(s.bytes_cached, 512u);
  EXPECT_EQ(s.device_frees, 1u);
  f.pool->trim();
  EXPECT_EQ(f.pool->statistics().bytes_reserved, 0u);
  EXPECT_EQ(f.device->outstanding(), 0u);
}

TEST(MemoryPoolLimits, running_out_of_device_memory_frees_the_cache_and_retries_once) {
  Fixture f({.max_reserved_ratio = 0}, /*capacity=*/8192);
  f.pool->release(f.pool->acquire(6000));   // 6144 cached
  DeviceMemory big = f.pool->acquire(7000); // 7168: fits only once the cache is freed
  EXPECT_EQ(big.bytes, 7168u);
  EXPECT_EQ(f.pool->statistics().device_frees, 1u);
  EXPECT_THROW(f.pool->acquire(2048), Error); // nothing cached left to free
  f.pool->release(big);
}

TEST(MemoryPoolLimits, a_block_released_twice_is_reported_as_a_bug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Fixture f;
        DeviceMemory a = f.pool->acquire(100);
        f.pool->release(a);
        f.pool->release(a);
      },
      "internal error .* did not hand out or got back already");
}

/// 8 threads allocate, fill, check and free blocks of recurring and random sizes; every block
/// carries its owner's pattern, so a block handed out twice shows as a clobbered pattern.
void run_threads(const PoolOptions &options) {
  Fixture f(options);
  constexpr int kThreads = 8, kSteps = 4000;
  std::vector<std::thread> threads;
  std::vector<int> clobbered(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      const uint64_t recurring[] = {1000, 4200, 12'345, 65'536, 100'000};
      std::vector<std::pair<DeviceMemory, uint64_t>> held; // block, requested bytes
      auto check_and_release = [&](size_t i) {
        auto [block, bytes] = held[i];
        const auto *p = static_cast<const unsigned char *>(block.handle);
        for (uint64_t k = 0; k < bytes; k += 61)
          if (p[k] != static_cast<unsigned char>(t * 31 + bytes))
            ++clobbered[t];
        f.pool->release(block);
        held[i] = held.back();
        held.pop_back();
      };
      for (int step = 0; step < kSteps; ++step) {
        if (held.size() < 16 && random() % 3 != 0) {
          uint64_t bytes = random() % 4 ? recurring[random() % 5] : 1 + random() % 200'000;
          DeviceMemory block = f.pool->acquire(bytes);
          EXPECT_GE(block.bytes, bytes);
          std::memset(block.handle, static_cast<unsigned char>(t * 31 + bytes), bytes);
          held.emplace_back(block, bytes);
        } else if (!held.empty()) {
          check_and_release(random() % held.size());
        }
      }
      while (!held.empty())
        check_and_release(held.size() - 1);
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(clobbered[t], 0) << "thread " << t;

  PoolStatistics s = f.pool->statistics();
  EXPECT_EQ(s.bytes_requested, 0u);
  EXPECT_EQ(s.bytes_live, 0u);
  EXPECT_EQ(s.bytes_reserved, s.bytes_cached);
  EXPECT_EQ(f.device->used(), s.bytes_cached); // every cached byte is a device byte
  EXPECT_EQ(s.device_allocations - s.device_frees, f.device->outstanding());
  EXPECT_GE(s.allocations, uint64_t(kThreads) * kSteps / 2);
  EXPECT_EQ(s.reuses + s.device_allocations, s.allocations);
  f.pool->trim();
  s = f.pool->statistics();
  EXPECT_EQ(s.bytes_reserved, 0u);
  EXPECT_EQ(s.device_allocations, s.device_frees);
  EXPECT_EQ(f.device->outstanding(), 0u);
  EXPECT_EQ(f.device->allocations(), s.device_allocations);
  EXPECT_EQ(f.device->frees(), s.device_frees);
  EXPECT_EQ(f.device->bad_frees(), 0u);
}

//===- The deletion queue --------------------------------------------------------------------===//

/// A stream whose queued work finishes only when the test says so.
class ManualStream final : public DeviceStream {
public:
  void upload(const DeviceMemory &, uint64_t, const void *, uint64_t) override { ++queued; }
  void download(const DeviceMemory &, uint64_t, void *, uint64_t) override { finish(); }
  void launch(const CompiledKernel &, std::array<uint32_t, 3>,
              std::span<const LaunchArg>) override {
    ++queued;
  }
  void synchronize() override { finish(); }
  std::vector<double> last_launch_times_ns() const override { return {}; }
  std::shared_ptr<DeviceEvent> record() override { return nullptr; }
  void wait(DeviceEvent &) override {}
  uint64_t mark() override { return queued.load(); }
  bool reached(uint64_t ticket) override { return ticket <= finished.load(); }

  void finish() { finished.store(queued.load()); }
  std::atomic<uint64_t> queued{0}, finished{0};
};

TEST(MemoryPoolDeletionQueue, a_block_waits_until_every_stream_reached_its_work) {
  Fixture f;
  ManualStream a, b;
  uint64_t id_a = f.pool->add_stream(a), id_b = f.pool->add_stream(b);
  DeviceMemory m = f.pool->acquire(4096, id_a);
  a.queued = 3; // a launch on `a` that uses `m` is still queued
  f.pool->release(m);
  EXPECT_EQ(f.pool->statistics().bytes_cached, m.bytes) << "waiting blocks count as cached";
  // Another stream must not get the block while `a`'s work may still use it...
  DeviceMemory other = f.pool->acquire(4096, id_b);
  EXPECT_NE(other.handle, m.handle);
  EXPECT_EQ(f.device->allocations(), 2u);
  // ...but `a` itself may: its work runs in order.
  DeviceMemory again = f.pool->acquire(4096, id_a);
  EXPECT_EQ(again.handle, m.handle);
  EXPECT_EQ(f.pool->statistics().reuses, 1u);
  f.pool->release(again);
  f.pool->release(other);
  f.pool->collect();
  EXPECT_EQ(f.pool->statistics().bytes_cached, 2 * m.bytes);
  // Once `a` finished, the block is an ordinary cached block, for any stream.
  a.finish();
  f.pool->collect();
  DeviceMemory for_b = f.pool->acquire(4096, id_b);
  DeviceMemory for_b2 = f.pool->acquire(4096, id_b);
  EXPECT_EQ(f.device->allocations(), 2u);
  f.pool->release(for_b);
  f.pool->release(for_b2);
  f.pool->remove_stream(id_a);
  f.pool->remove_stream(id_b);
}

TEST(MemoryPoolDeletionQueue, adopted_memory_is_let_go_once_the_work_is_done) {
  Fixture f;
  ManualStream a;
  uint64_t id = f.pool->add_stream(a);
  int released = 0;
  DeviceMemory adopted = f.device->allocate(256); // stands in for the caller's memory
  a.queued = 1;
  f.pool->release_adopted(adopted, [&] { ++released; });
  f.pool->collect();
  EXPECT_EQ(released, 0) << "queued work may still use the memory";
  EXPECT_EQ(f.pool->statistics().bytes_cached, 0u) << "adopted memory is never counted";
  a.finish();
  f.pool->collect();
  // collect() runs under a stream's lock: the callback (the caller's code) waits for
  // release_ready(), which the stream calls once its lock is released.
  EXPECT_EQ(released, 0);
  f.pool->release_ready();
  EXPECT_EQ(released, 1);
  f.pool->collect();
  f.pool->release_ready();
  EXPECT_EQ(released, 1) << "exactly once";
  f.pool->remove_stream(id);
  f.device->free(adopted);
}

TEST(MemoryPoolDeletionQueue, acquire_leaves_release_callbacks_to_release_ready) {
  Fixture f;
  ManualStream a;
  uint64_t id = f.pool->add_stream(a);
  int released = 0;
  DeviceMemory adopted = f.device->allocate(256);
  a.queued = 1;
  f.pool->release_adopted(adopted, [&] { ++released; });
  a.finish();
  DeviceMemory m = f.pool->acquire(512, id); // finds the adopted memory done
  EXPECT_EQ(released, 0);
  f.pool->release_ready();
  EXPECT_EQ(released, 1);
  f.pool->release(m);
  f.pool->remove_stream(id);
  f.device->free(adopted);
}

TEST(MemoryPoolDeletionQueue, a_stream_that_goes_away_releases_what_waited_for_it) {
  Fixture f({.max_cached_bytes = 0}); // nothing cached: a settled block goes back at once
  ManualStream a;
  uint64_t id = f.pool->add_stream(a);
  DeviceMemory m = f.pool->acquire(1024, id);
  a.queued = 1;
  f.pool->release(m);
  EXPECT_EQ(f.device->frees(), 0u);
  a.finish(); // what a stream does before it is removed (its destructor synchronizes)
  f.pool->remove_stream(id);
  EXPECT_EQ(f.device->frees(), 1u);
  EXPECT_EQ(f.pool->statistics().bytes_reserved, 0u);
}

TEST(MemoryPoolThreads, eight_threads_allocating_and_freeing_lose_nothing_adaptive) {
  run_threads({});
}

TEST(MemoryPoolThreads, eight_threads_lose_nothing_with_tight_limits) {
  run_threads({.max_cached_bytes = 512 * 1024, .idle_release_allocations = 64});
}

TEST(MemoryPoolThreads, eight_threads_allocating_and_freeing_lose_nothing_power_of_two) {
  run_threads({.policy = PoolPolicy::PowerOfTwo});
}

} // namespace
} // namespace cubecc::runtime
