//===- cpu_device_test.cpp - The cpu device: loading objects, launching, caching, choosing
//-----===//
//
// Driven by hand-written kernel objects (cpu_kernel_fixture.c, built by CMake for subgroups of 4,
// 8 and 16 lanes) that follow cpu_abi.h as the LLVM backend's objects do, so that loading,
// launching, checked-mode messages and the object cache are tested without LLVM.
//
//===-----------------------------------------------------------------------------------------===//
#include "cpu/cpu_device.h"
#include "cpu/object_cache.h"
#include "cubecc/codegen/cpu_elf.h"

#include "cubecc/codegen/cpu.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/files.h"
#include "cubecc/runtime/runtime.h"

#include "test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <elf.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

namespace cubecc {
namespace {

using runtime::Error;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::string_view kStagedAxpy = R"(
module @m {
  kernel @staged_axpy(%x: buffer<f32, read>, %y: buffer<f32, readwrite>, %a: f32) workgroup(64, 1, 1) {
    %s = shared.alloc : shared<f32, 64>
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %lid3 = local_id : u32x3
    %lid = vec.extract %lid3 {lane = 0} : u32
    %xi = load %x, %i : f32 loc("axpy.cpp":12:5)
    store %s, %lid, %xi
    barrier
    %n = buffer.size %y : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %si = load %s, %lid : f32
      %yi = load %y, %i : f32
      %r = fma %a, %si, %yi : f32
      store %y, %i, %r
      yield
    }
    return
  } loc("axpy.cpp":5:6)
}
)";

using test::ScopedEnv;

/// A fresh folder under the test's temporary directory, removed afterwards.
class TemporaryFolder {
public:
  TemporaryFolder() {
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("cubecc-cpu-test-{}-{}", ::getpid(), counter_++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TemporaryFolder() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }

private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

/// The fixture object whose subgroups have `lanes` lanes.
std::string fixture_object(uint32_t lanes) {
  std::string path = fmt::format("{}/cpu_kernel_fixture_{}.so", CUBECC_CPU_FIXTURE_DIR, lanes);
  std::string bytes = test::read_file(path);
  EXPECT_FALSE(bytes.empty()) << path;
  return bytes;
}

struct Fixture {
  std::unique_ptr<ir::Module> module = test::parse_valid(kStagedAxpy);
  const ir::Kernel &kernel() const { return *module->kernels().front(); }
  codegen::KernelAbi abi() const { return codegen::KernelAbi::of(kernel()); }
};

/// A KernelBinary of the fixture object with `lanes` lanes, marked as built for `level`.
runtime::KernelBinary binary_of(const std::string &object, const std::string &level,
                                const codegen::KernelAbi &abi) {
  runtime::KernelBinary binary;
  binary.target = {"cpu:" + level, "elf", "", ""};
  binary.bytes = object;
  binary.abi = abi;
  return binary;
}

std::unique_ptr<runtime::Device> open_cpu() {
  return runtime::open_cpu_device();
}

/// A launch of the fixture over `n` elements of y (x has `x_count`), checked against the host.
void run_staged_axpy(runtime::Runtime &rt, const runtime::KernelHandle &k, size_t n,
                     size_t x_count) {
  std::vector<float> x(x_count), y(n);
  for (size_t i = 0; i < x_count; ++i)
    x[i] = float(i % 1000) * 0.5f;
  for (size_t i = 0; i < n; ++i)
    y[i] = float(i % 7);
  runtime::Buffer bx = rt.upload(x), by = rt.upload(y);
  uint32_t groups = uint32_t((n + 63) / 64);
  rt.launch(k, {groups, 1, 1}, bx, by, 2.0f);
  rt.synchronize();
  std::vector<float> out = rt.download<float>(by);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 2.0f * (i < x_count ? x[i] : 0.0f) + y[i]) << "element " << i;
}

//===- The ELF checks ------------------------------------------------------------------------===//

TEST(CpuElfCheck, the_fixture_object_passes) {
  EXPECT_EQ(codegen::elf_shared_object_problem(fixture_object(8)), "");
}

TEST(CpuElfCheck, every_truncation_of_an_object_is_refused) {
  std::string object = fixture_object(8);
  // Every length up to the end of the headers the checks read, then a sample beyond.
  for (size_t length = 0; length < object.size(); length += length < 4096 ? 1 : 97)
    EXPECT_NE(codegen::elf_shared_object_problem(std::string_view(object).substr(0, length)), "")
        << "a truncation to " << length << " of " << object.size() << " bytes passed";
}

TEST(CpuElfCheck, malformed_hash_tables_and_relocations_are_refused_before_the_loader_sees_them) {
  // glibc's loader asserts on a GNU hash header whose bloom size is not a power of two, and
  // applies relocations wherever they point (an adversarial review crashed it both ways).
  const std::string object = fixture_object(8);
  Elf64_Ehdr header;
  std::memcpy(&header, object.data(), sizeof header);
  std::vector<Elf64_Phdr> loads;
  Elf64_Phdr dynamic{};
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr p;
    std::memcpy(&p, object.data() + header.e_phoff + i * sizeof p, sizeof p);
    if (p.p_type == PT_LOAD)
      loads.push_back(p);
    else if (p.p_type == PT_DYNAMIC)
      dynamic = p;
  }
  auto offset_of = [&](uint64_t address) -> uint64_t {
    for (const Elf64_Phdr &l : loads)
      if (address >= l.p_vaddr && address < l.p_vaddr + l.p_filesz)
        return l.p_offset + (address - l.p_vaddr);
    ADD_FAILURE() << "address " << address << " is in no PT_LOAD";
    return 0;
  };
  uint64_t gnu_hash = 0, rela = 0;
  for (uint64_t at = dynamic.p_offset; at < dynamic.p_offset + dynamic.p_filesz; at += 16) {
    Elf64_Dyn d;
    std::memcpy(&d, object.data() + at, sizeof d);
    if (d.d_tag == DT_GNU_HASH)
      gnu_hash = offset_of(d.d_un.d_ptr);
    if (d.d_tag == DT_RELA)
      rela = offset_of(d.d_un.d_ptr);
  }
  ASSERT_NE(gnu_hash, 0u) << "the fixture (gcc -shared) has a GNU hash table";
  ASSERT_NE(rela, 0u) << "the fixture (gcc -shared) has relocations";
  std::string bytes = object;
  uint32_t three = 3;
  std::memcpy(bytes.data() + gnu_hash + 8, &three, 4); // the bloom filter's word count
  EXPECT_THAT(codegen::elf_shared_object_problem(bytes), HasSubstr("is malformed ("))
      << "a bloom filter of 3 words";
  bytes = object;
  uint64_t far = uint64_t(1) << 40;
  std::memcpy(bytes.data() + rela, &far, 8); // the first relocation's r_offset
  EXPECT_THAT(codegen::elf_shared_object_problem(bytes),
              HasSubstr("relocation writes at 0x10000000000, outside the object's memory"));
}

TEST(CpuElfCheck, garbled_headers_are_refused_with_what_is_wrong) {
  const std::string object = fixture_object(8);
  auto with = [&](auto change) {
    std::string bytes = object;
    Elf64_Ehdr header;
    std::memcpy(&header, bytes.data(), sizeof header);
    change(bytes, header);
    std::memcpy(bytes.data(), &header, sizeof header);
    return codegen::elf_shared_object_problem(bytes);
  };
  auto program_header = [](std::string &bytes, const Elf64_Ehdr &h, uint32_t type) -> Elf64_Phdr * {
    for (unsigned i = 0; i < h.e_phnum; ++i) {
      auto *p = reinterpret_cast<Elf64_Phdr *>(bytes.data() + h.e_phoff + i * sizeof(Elf64_Phdr));
      if (p->p_type == type)
        return p;
    }
    return nullptr;
  };
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_ident[0] = 'X'; }),
              HasSubstr("bad magic"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_ident[EI_CLASS] = ELFCLASS32; }),
              HasSubstr("64-bit"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_ident[EI_DATA] = ELFDATA2MSB; }),
              HasSubstr("little-endian"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_machine = EM_AARCH64; }),
              HasSubstr("not x86-64"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_type = ET_EXEC; }),
              HasSubstr("not a shared object"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_phoff = ~uint64_t(0) - 8; }),
              HasSubstr("program header table"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_phnum = 0; }),
              HasSubstr("0 program headers"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_phentsize = 32; }),
              HasSubstr("program headers of 32 bytes"));
  EXPECT_THAT(with([&](std::string &, Elf64_Ehdr &h) { h.e_shoff = object.size() - 8; }),
              HasSubstr("section header table"));
  EXPECT_THAT(with([](std::string &, Elf64_Ehdr &h) { h.e_shstrndx = h.e_shnum + 3; }),
              HasSubstr("section name table"));
  EXPECT_THAT(with([&](std::string &b, Elf64_Ehdr &h) {
                program_header(b, h, PT_DYNAMIC)->p_vaddr = uint64_t(1) << 40;
              }),
              HasSubstr("inside no PT_LOAD"));
  EXPECT_THAT(with([&](std::string &b, Elf64_Ehdr &h) {
                program_header(b, h, PT_DYNAMIC)->p_type = PT_NOTE;
              }),
              HasSubstr("0 PT_DYNAMIC"));
  EXPECT_THAT(with([&](std::string &b, Elf64_Ehdr &h) {
                program_header(b, h, PT_LOAD)->p_filesz = object.size() * 2;
              }),
              HasSubstr("lies outside"));
  EXPECT_THAT(
      with([&](std::string &b, Elf64_Ehdr &h) { program_header(b, h, PT_LOAD)->p_align = 3; }),
      HasSubstr("not a power of two"));
  EXPECT_THAT(with([&](std::string &b, Elf64_Ehdr &h) {
                program_header(b, h, PT_GNU_STACK)->p_flags |= PF_X;
              }),
              HasSubstr("executable stack"));
}

TEST(CpuElfCheck, random_damage_never_crashes_the_check) {
  const std::string object = fixture_object(8);
  std::mt19937_64 random(42);
  Elf64_Ehdr header;
  std::memcpy(&header, object.data(), sizeof header);
  // Bytes of the ELF header and the program headers: where damage matters to the check.
  size_t headers_end = header.e_phoff + header.e_phnum * sizeof(Elf64_Phdr);
  for (int round = 0; round < 5000; ++round) {
    std::string bytes = object;
    for (int flips = 1 + int(random() % 4); flips > 0; --flips)
      bytes[random() % headers_end] = char(random());
    (void)codegen::elf_shared_object_problem(bytes); // ASan and UBSan judge it
  }
}

//===- The object cache's files --------------------------------------------------------------===//

TEST(CpuObjectCache, a_file_round_trips_and_any_damage_is_a_miss) {
  const std::string object = fixture_object(8);
  std::string file = runtime::CpuObjectCache::encode("the key", object);
  std::string why;
  EXPECT_EQ(runtime::CpuObjectCache::decode(file, "the key", why), object);
  EXPECT_FALSE(runtime::CpuObjectCache::decode(file, "another key", why));
  EXPECT_THAT(why, HasSubstr("another key"));
  EXPECT_FALSE(runtime::CpuObjectCache::decode(file.substr(0, file.size() - 1), "the key", why));
  EXPECT_THAT(why, HasSubstr("truncated"));
  std::string flipped = file;
  flipped[flipped.size() / 2] ^= 1;
  EXPECT_FALSE(runtime::CpuObjectCache::decode(flipped, "the key", why));
  EXPECT_THAT(why, HasSubstr("checksum"));
  EXPECT_FALSE(runtime::CpuObjectCache::decode("", "the key", why));
  EXPECT_FALSE(
      runtime::CpuObjectCache::decode("cubecc-cpu-object 1\nthe key\n12 zz\n", "the key", why));
}

//===- The device ----------------------------------------------------------------------------===//

TEST(CpuDevice, says_what_it_is) {
  auto device = open_cpu();
  const runtime::DeviceInfo &info = device->info();
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_EQ(info.device_class, runtime::DeviceClass::Cpu);
  EXPECT_EQ(info.arch, codegen::host_cpu_level());
  EXPECT_EQ(info.subgroup_size, codegen::cpu_features(info.arch).subgroup_size);
  EXPECT_EQ(info.features.fingerprint(), codegen::cpu_features(info.arch).fingerprint());
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.timestamp_period_ns, 1);
  std::vector<runtime::BinaryTarget> targets = device->binary_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(targets.front().target, "cpu:" + info.arch); // best first, down to x86-64-v2
  EXPECT_EQ(targets.back().target, "cpu:x86-64-v2");
  for (const runtime::BinaryTarget &t : targets) {
    EXPECT_EQ(t.format, "elf");
    EXPECT_EQ(t.toolkit, ""); // loading compiles nothing: an object from any LLVM is loadable
  }
}

TEST(CpuDevice, runs_a_loaded_object_over_many_workgroups_with_aligned_shared_memory) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  auto compiled = rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi()));
  runtime::KernelHandle k = rt.adopt(f.kernel(), std::move(compiled));
  run_staged_axpy(rt, k, 64 * 5000 - 3, 64 * 5000);
  run_staged_axpy(rt, k, 1, 64); // one workgroup: run on the calling thread
}

TEST(CpuDevice, launch_times_are_reported_per_launch) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  runtime::KernelHandle k =
      rt.adopt(f.kernel(), rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi())));
  runtime::Buffer x = rt.allocate<float>(64 * 100), y = rt.allocate<float>(64 * 100);
  for (int i = 0; i < 3; ++i)
    rt.launch(k, {100, 1, 1}, x, y, 1.0f);
  rt.launch(k, {0, 1, 1}, x, y, 1.0f); // an empty grid runs nothing and still has a time
  rt.synchronize();
  std::vector<double> times = rt.last_launch_times_ns();
  ASSERT_EQ(times.size(), 4u);
  for (double t : times)
    EXPECT_GT(t, 0);
}

TEST(CpuDevice, launch_arguments_are_checked) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  runtime::KernelHandle k =
      rt.adopt(f.kernel(), rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi())));
  runtime::Buffer x = rt.allocate<float>(64), y = rt.allocate<float>(64);
  std::unique_ptr<runtime::DeviceStream> stream = rt.device().create_stream();
  runtime::DeviceStream &device = *stream;
  std::vector<runtime::LaunchArg> args(3);
  args[0] = x.arg();
  args[1] = y.arg();
  args[2].bits = {0x3f800000};
  EXPECT_THAT(
      [&] {
        device.launch(k.compiled(), {65536, 1, 1}, args);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("exceeds the device's maximum")));
  EXPECT_THAT(
      [&] {
        device.launch(k.compiled(), {1, 1, 1}, std::span(args).first(2));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("2 arguments for 3 parameters")));
  auto misaligned = args;
  misaligned[0].offset = 2;
  misaligned[0].bytes = 8;
  EXPECT_THAT(
      [&] {
        device.launch(k.compiled(), {1, 1, 1}, misaligned);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("not a multiple of its element size 4")));
  auto outside = args;
  outside[1].bytes = 1024;
  EXPECT_THAT(
      [&] {
        device.launch(k.compiled(), {1, 1, 1}, outside);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("lies outside")));
  auto no_value = args;
  no_value[2].bits.clear();
  EXPECT_THAT(
      [&] {
        device.launch(k.compiled(), {1, 1, 1}, no_value);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("parameter 2 needs 1 lane(s)")));
}

TEST(CpuDevice, an_object_for_a_level_the_host_lacks_is_refused_before_loading) {
  ScopedEnv level("CUBECC_CPU_LEVEL", "x86-64-v2");
  Fixture f;
  auto device = open_cpu();
  EXPECT_EQ(device->info().arch, "x86-64-v2");
  ASSERT_EQ(device->binary_targets().size(), 1u);
  std::string object = fixture_object(8);
  EXPECT_THAT([&] { device->load_binary(binary_of(object, "x86-64-v3", f.abi())); },
              ::testing::ThrowsMessage<Error>(
                  AllOf(HasSubstr("kernel 'staged_axpy'"), HasSubstr("built for x86-64-v3"),
                        HasSubstr("it runs x86-64-v2"), HasSubstr("refused before loading"))));
}

TEST(CpuDevice, an_object_whose_subgroups_disagree_with_its_level_is_refused) {
  Fixture f;
  auto device = open_cpu();
  std::string object = fixture_object(8); // subgroups of 8: x86-64-v3's, not x86-64-v2's
  EXPECT_THAT([&] { device->load_binary(binary_of(object, "x86-64-v2", f.abi())); },
              ::testing::ThrowsMessage<Error>(
                  AllOf(HasSubstr("kernel 'staged_axpy'"),
                        HasSubstr("subgroups of 8 lanes, but x86-64-v2 has 4"))));
}

TEST(CpuDevice, launch_metadata_that_disagrees_with_the_objects_code_is_refused) {
  // A bundle's metadata edited behind its checksums (an adversarial review changed y's element
  // type from f32 to f16: the code then wrote 4 bytes an element into 2-byte ones, corrupting the
  // heap). The object says what it was built for (cubecc_cpu_interface); anything else is refused.
  Fixture f;
  auto device = open_cpu();
  std::string object = fixture_object(4);
  EXPECT_NO_THROW(device->load_binary(binary_of(object, "x86-64-v2", f.abi())));
  auto refused = [&](codegen::KernelAbi abi, const char *interface) {
    EXPECT_THAT([&] { device->load_binary(binary_of(object, "x86-64-v2", abi)); },
                ::testing::ThrowsMessage<Error>(
                    AllOf(HasSubstr("kernel 'staged_axpy'"),
                          HasSubstr("its object's code was not built for its launch metadata"),
                          HasSubstr(interface))));
  };
  codegen::KernelAbi abi = f.abi();
  abi.params[1].type = ir::Type::buffer(ir::Scalar::F16, ir::Access::ReadWrite);
  refused(abi, "buffer<f16, readwrite> binding 1");
  abi = f.abi();
  abi.shared_bytes = 128;
  refused(abi, "shared 128");
  abi = f.abi();
  abi.workgroup_size = {32, 2, 1};
  refused(abi, "workgroup 32 2 1");
  abi = f.abi();
  abi.params[2].offset = 4;
  abi.param_block_bytes = 8;
  refused(abi, "f32 at 4 x4");
}

TEST(CpuDevice, a_damaged_or_foreign_binary_is_refused_naming_the_kernel_and_why) {
  Fixture f;
  auto device = open_cpu();
  std::string object = fixture_object(4);
  std::string truncated = object.substr(0, 100);
  EXPECT_THAT([&] { device->load_binary(binary_of(truncated, "x86-64-v2", f.abi())); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'staged_axpy'"),
                                                    HasSubstr("not a loadable shared object"))));
  runtime::KernelBinary spirv = binary_of(object, "x86-64-v2", f.abi());
  spirv.target = {"vulkan", "spirv", "", ""};
  EXPECT_THAT([&] { device->load_binary(spirv); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot load a spirv binary")));
  EXPECT_THAT([&] { device->load_binary(binary_of(object, "x86-64-v9", f.abi())); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown CPU level 'x86-64-v9'")));
  codegen::KernelAbi bad = f.abi();
  bad.params[2].offset = 4096; // the value would be packed past the parameter block
  EXPECT_THAT([&] { device->load_binary(binary_of(object, "x86-64-v2", bad)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("lies outside its parameter block")));
  bad = f.abi();
  bad.workgroup_size = {2048, 1, 1};
  EXPECT_THAT([&] { device->load_binary(binary_of(object, "x86-64-v2", bad)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("over the device's limit")));
}

TEST(CpuDevice, many_objects_load_side_by_side_and_unload) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<runtime::CompiledKernel>> kernels;
    for (int i = 0; i < 20; ++i)
      kernels.push_back(rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi())));
  }
  runtime::KernelHandle k =
      rt.adopt(f.kernel(), rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi())));
  run_staged_axpy(rt, k, 1000, 1024);
}

TEST(CpuDevice, adopts_host_memory_without_copying) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  runtime::KernelHandle k =
      rt.adopt(f.kernel(), rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi())));
  std::vector<float> x(128, 1.0f), y(128, 3.0f);
  bool released = false;
  {
    runtime::Buffer bx =
        rt.adopt_memory(runtime::ExternalMemory::host(x.data(), x.size() * 4), ir::Scalar::F32);
    runtime::Buffer by = rt.adopt_memory(runtime::ExternalMemory::host(y.data(), y.size() * 4),
                                         ir::Scalar::F32, [&] { released = true; });
    EXPECT_TRUE(by.adopted());
    EXPECT_EQ(rt.native_memory(by).handle, reinterpret_cast<uintptr_t>(y.data()));
    rt.launch(k, {2, 1, 1}, bx, by, 2.0f);
    rt.synchronize();
    EXPECT_EQ(y[127], 5.0f); // the kernel wrote the caller's memory
  }
  EXPECT_TRUE(released);
  EXPECT_THAT([&] { rt.adopt_memory(runtime::ExternalMemory::cuda(0x1000, 64), ir::Scalar::F32); },
              ::testing::ThrowsMessage<Error>(HasSubstr("on the cuda device")));
}

TEST(CpuDevice, host_memory_is_adoptable_by_interp_and_cpu_alike) {
  std::vector<uint32_t> host(16);
  for (const char *name : {"interp", "cpu"}) {
    runtime::Runtime rt = runtime::Runtime::open(name);
    EXPECT_EQ(rt.device().memory_kind(), runtime::ExternalMemory::Kind::Host);
    runtime::Buffer b =
        rt.adopt_memory(runtime::ExternalMemory::host(host.data(), 64), ir::Scalar::U32);
    EXPECT_EQ(b.size(), 16u) << name;
  }
}

TEST(CpuDevice, memory_is_64_byte_aligned_and_pooled) {
  runtime::Runtime rt(open_cpu());
  for (size_t count : {1, 3, 1000, 100000}) {
    runtime::Buffer b = rt.allocate<uint8_t>(count);
    EXPECT_EQ(rt.native_memory(b).handle % 64, 0u) << count;
    std::vector<uint8_t> data(count, 7);
    rt.upload(b, std::span<const uint8_t>(data));
    EXPECT_EQ(rt.download<uint8_t>(b), data);
  }
  uint64_t reuses = rt.pool_statistics().reuses;
  { runtime::Buffer again = rt.allocate<uint8_t>(1000); }
  EXPECT_EQ(rt.pool_statistics().reuses, reuses + 1); // a cached block, not a new allocation
  EXPECT_THAT([&] { rt.allocate<uint8_t>(size_t(rt.info().max_buffer_bytes) + 1); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cpu: out of memory")));
}

TEST(CpuDevice, a_graph_replays_its_launches_with_changed_values) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  runtime::KernelHandle k =
      rt.adopt(f.kernel(), rt.device().load_binary(binary_of(object, "x86-64-v2", f.abi())));
  runtime::Buffer x = rt.upload(std::vector<float>(256, 1.0f));
  runtime::Buffer y = rt.upload(std::vector<float>(256, 0.0f));
  rt.begin_capture();
  rt.launch(k, {4, 1, 1}, x, y, 1.0f);
  rt.launch(k, {4, 1, 1}, x, y, 2.0f);
  runtime::Graph graph = rt.end_capture();
  EXPECT_EQ(graph.num_launches(), 2u);
  rt.replay(graph);
  graph.set_scalar(1, 2, 10.0f);
  rt.replay(graph);
  rt.synchronize();
  EXPECT_EQ(rt.download<float>(y)[255], 1.0f + 2.0f + 1.0f + 10.0f);
}

// Not a benchmark (the test build has sanitizers): prints what a load and a launch cost here, for
// the record, and checks only that they work.
TEST(CpuDevice, prints_what_loading_an_object_and_launching_cost) {
  Fixture f;
  runtime::Runtime rt(open_cpu());
  std::string object = fixture_object(4);
  runtime::KernelBinary binary = binary_of(object, "x86-64-v2", f.abi());
  constexpr int kLoads = 50;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kLoads; ++i)
    rt.device().load_binary(binary);
  double load_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      kLoads;
  runtime::KernelHandle k = rt.adopt(f.kernel(), rt.device().load_binary(binary));
  runtime::Buffer x = rt.allocate<float>(64 * 1024), y = rt.allocate<float>(64 * 1024);
  auto per_launch_us = [&](uint32_t groups, int launches) {
    rt.launch(k, {groups, 1, 1}, x, y, 1.0f); // warm: threads started, scratch allocated
    rt.synchronize();
    auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i)
      rt.launch(k, {groups, 1, 1}, x, y, 1.0f);
    rt.synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin)
               .count() /
           launches;
  };
  double one_group_us = per_launch_us(1, 2000);
  double many_groups_us = per_launch_us(1024, 200);
  std::printf("cpu device (%s, %s): load_binary of the fixture (%zu bytes) %.1f us; launch of 1 "
              "workgroup %.2f us, of 1024 workgroups of 64 (64 Ki elements) %.1f us, through "
              "Runtime::launch\n",
              rt.info().name.c_str(), rt.info().driver.c_str(), object.size(), load_us,
              one_group_us, many_groups_us);
  EXPECT_GT(load_us, 0);
  // The first call maps the LLVM plugin (when this test runs first in its process).
  auto plugin_begin = std::chrono::steady_clock::now();
  std::string llvm = codegen::llvm_version();
  double plugin_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - plugin_begin)
          .count();
  if (llvm.empty())
    return;
  std::printf("cpu device: codegen::llvm_version() %.1f ms (maps the LLVM plugin on its first "
              "call)\n",
              plugin_ms);
  // With the LLVM backend: the first compile, a compile served by the object cache, and loading
  // the same object as a bundle entry would be loaded.
  TemporaryFolder folder;
  ScopedEnv cache("CUBECC_CACHE_DIR", folder.path().c_str());
  auto seconds_of = [](auto &&work) {
    auto begin = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  std::unique_ptr<runtime::CompiledKernel> compiled;
  double compile_ms = 1e3 * seconds_of([&] { compiled = rt.device().compile(f.kernel()); });
  double cached_ms = 1e3 * seconds_of([&] { compiled = rt.device().compile(f.kernel()); });
  runtime::CpuObjectCache objects(runtime::user_cache_directory());
  std::string key = runtime::cpu_object_cache_key(f.kernel(), rt.info().arch, false), why;
  std::optional<std::string> llvm_object =
      runtime::CpuObjectCache::decode(test::read_file(objects.path_of(key)), key, why);
  ASSERT_TRUE(llvm_object) << why;
  runtime::KernelBinary entry = binary_of(*llvm_object, rt.info().arch, f.abi());
  double entry_us = 1e6 * seconds_of([&] {
                      for (int i = 0; i < kLoads; ++i)
                        rt.device().load_binary(entry);
                    }) /
                    kLoads;
  std::printf("cpu device, kernel staged_axpy compiled by %s for %s: first compile %.1f ms, "
              "compile from the object cache %.2f ms, load_binary of the %zu-byte object %.1f "
              "us\n",
              codegen::llvm_version().c_str(), rt.info().arch.c_str(), compile_ms, cached_ms,
              llvm_object->size(), entry_us);
}

//===- Compiling through the object cache, and checked mode ----------------------------------===//

TEST(CpuDevice, compile_takes_an_object_from_the_per_user_cache_and_checked_mode_names_the_fault) {
  TemporaryFolder folder;
  ScopedEnv cache("CUBECC_CACHE_DIR", folder.path().c_str());
  ScopedEnv checked("CUBECC_CHECKED", "1");
  Fixture f;
  runtime::Runtime rt(open_cpu());
  const std::string level = rt.info().arch;
  EXPECT_TRUE(rt.device().binary_targets().empty()); // checked: every kernel is compiled
  // Put the object where a previous run's compile_cpu would have left it.
  runtime::CpuObjectCache objects(runtime::user_cache_directory());
  std::string key = runtime::cpu_object_cache_key(f.kernel(), level, true);
  objects.store(key, fixture_object(rt.info().subgroup_size));
  ASSERT_TRUE(std::filesystem::exists(objects.path_of(key)));
  runtime::KernelHandle k = rt.adopt(f.kernel(), rt.device().compile(f.kernel()));
  run_staged_axpy(rt, k, 128, 128);
  // x is shorter than y: the first load past its end is reported, with the parameter's name.
  std::vector<float> x(100), y(128);
  runtime::Buffer bx = rt.upload(x), by = rt.upload(y);
  EXPECT_THAT(
      [&] {
        rt.launch(k, {2, 1, 1}, bx, by, 1.0f);
      },
      ::testing::ThrowsMessage<Error>(
          AllOf(HasSubstr("cpu: kernel 'staged_axpy': parameter 0 ('x'), a load at "
                          "index 100 of 100 elements (axpy.cpp:12:5)"))));
}

TEST(CpuDevice, a_second_start_takes_the_compiled_kernel_from_the_cache_and_compiles_nothing) {
  if (std::string why; codegen::llvm_version(&why).empty())
    GTEST_SKIP() << "the LLVM backend is not available: " << why;
  TemporaryFolder folder;
  ScopedEnv cache("CUBECC_CACHE_DIR", folder.path().c_str());
  ScopedEnv checked("CUBECC_CHECKED", nullptr);
  auto module = test::example_module("axpy.cir");
  const ir::Kernel &axpy = *module->kernels().front();
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(i);
    y[i] = 1.0f - float(i);
  }
  auto run = [&] {
    runtime::Runtime rt = runtime::Runtime::open("cpu"); // a new device: as a new process would
    runtime::KernelHandle k = rt.load(axpy);
    runtime::Buffer bx = rt.upload(x), by = rt.upload(y);
    rt.launch(k, runtime::grid_1d(x.size(), 256), bx, by, 3.0f);
    return rt.download<float>(by);
  };
  uint64_t before = runtime::cpu_device_compiles();
  std::vector<float> first = run();
  EXPECT_EQ(runtime::cpu_device_compiles(), before + 1);
  std::vector<float> second = run();
  EXPECT_EQ(runtime::cpu_device_compiles(), before + 1); // the object came from the cache
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(first[i], std::fma(3.0f, x[i], y[i])) << "element " << i;
  EXPECT_EQ(first, second);
}

// 1024 invocations with a local<f32, 1024> each and a barrier: the workgroup's local arrays take
// 4 MiB (one copy per subgroup, docs/cpu.md), from the heap of the thread that runs it, on every
// worker thread at once.
TEST(CpuDevice, workgroups_with_megabytes_of_local_arrays_run_on_every_thread) {
  if (std::string why; codegen::llvm_version(&why).empty())
    GTEST_SKIP() << "the LLVM backend is not available: " << why;
  auto module = test::parse_valid(test::local_arrays_kernel("big_local", 1024));
  runtime::Runtime rt = runtime::Runtime::open("cpu");
  runtime::KernelHandle k = rt.load(*module->kernels().front());
  const uint32_t groups = 16;
  runtime::Buffer out = rt.allocate<float>(groups * 1024);
  rt.launch(k, {groups, 1, 1}, out);
  std::vector<float> got = rt.download<float>(out);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], float(i)) << "element " << i;
}

TEST(CpuDevice, checked_mode_reports_an_out_of_bounds_load_of_a_compiled_kernel) {
  if (std::string why; codegen::llvm_version(&why).empty())
    GTEST_SKIP() << "the LLVM backend is not available: " << why;
  ScopedEnv checked("CUBECC_CHECKED", "1");
  Fixture f;
  runtime::Runtime rt = runtime::Runtime::open("cpu");
  runtime::KernelHandle k = rt.load(f.kernel()); // -O2, then compiled with bounds checks
  run_staged_axpy(rt, k, 256, 256);
  std::vector<float> x(100), y(256);
  runtime::Buffer bx = rt.upload(x), by = rt.upload(y);
  EXPECT_THAT(
      [&] {
        rt.launch(k, {4, 1, 1}, bx, by, 1.0f);
      },
      ::testing::ThrowsMessage<Error>(
          AllOf(HasSubstr("cpu: kernel 'staged_axpy': parameter 0 ('x'), a load at index "),
                HasSubstr(" of 100 elements (axpy.cpp:12:5)"))));
}

TEST(CpuDevice, checked_mode_reports_out_of_bounds_shared_and_local_array_accesses) {
  if (std::string why; codegen::llvm_version(&why).empty())
    GTEST_SKIP() << "the LLVM backend is not available: " << why;
  ScopedEnv checked("CUBECC_CHECKED", "1");
  // %s indexes the shared array, %l the local one (a uniform index: the local row path; each
  // invocation's own slot %i & 7 is stored first, so nothing forwards the load away).
  auto module = test::parse_valid(R"(module @m {
  kernel @arrays(%out: buffer<u32, readwrite>, %s: u32, %l: u32) workgroup(64, 1, 1) {
    %sh = shared.alloc : shared<u32, 64>
    %loc = local.alloc : local<u32, 8>
    %i = local_index : u32
    store %sh, %i, %i
    %seven = const 7 : u32
    %slot = and %i, %seven : u32
    store %loc, %slot, %i
    barrier
    %a = load %sh, %s : u32
    %b = load %loc, %l : u32
    %sum = add %a, %b : u32
    store %out, %i, %sum
    return
  }
})");
  ASSERT_TRUE(module);
  runtime::Runtime rt = runtime::Runtime::open("cpu");
  runtime::KernelHandle k = rt.load(*module->kernels()[0]);
  runtime::Buffer out = rt.upload(std::vector<uint32_t>(64));
  rt.launch(k, {1, 1, 1}, out, 3u, 0u); // in bounds: runs
  std::vector<uint32_t> got = rt.download<uint32_t>(out);
  EXPECT_EQ(got[8], 3u + 8u); // sh[3] = 3; invocation 8's local slot 0 holds 8
  EXPECT_THAT(
      [&] {
        rt.launch(k, {1, 1, 1}, out, 64u, 0u);
      },
      ::testing::ThrowsMessage<Error>(
          HasSubstr("cpu: kernel 'arrays': a shared array, a load at index 64 of 64 "
                    "elements (checked mode")));
  EXPECT_THAT(
      [&] {
        rt.launch(k, {1, 1, 1}, out, 0u, 1000000u);
      },
      ::testing::ThrowsMessage<Error>(
          HasSubstr("cpu: kernel 'arrays': a local array, a load at index 1000000 of 8 "
                    "elements (checked mode")));
}

TEST(CpuDevice, checked_mode_reports_matrix_loads_and_stores_out_of_bounds) {
  if (std::string why; codegen::llvm_version(&why).empty())
    GTEST_SKIP() << "the LLVM backend is not available: " << why;
  ScopedEnv checked("CUBECC_CHECKED", "1");
  // A 16x16 f16 tile at %in[%at ..] (leading dimension 16), doubled through an f32
  // accumulator (A x I + A with B = the identity), stored at %out[%to ..].
  auto module = test::parse_valid(R"(module @m {
  kernel @tile(%in: buffer<f16, read>, %id: buffer<f16, read>, %out: buffer<f32, readwrite>,
               %at: u32, %to: u32) workgroup(32, 1, 1) {
    %ld = const 16 : u32
    %zero = const 0 : u32
    %a = matrix.load %in, %at, %ld : matrix<subgroup, a, f16, 16, 16>
    %b = matrix.load %id, %zero, %ld : matrix<subgroup, b, f16, 16, 16>
    %fz = const 0 : f32
    %c0 = matrix.fill %fz : matrix<subgroup, acc, f32, 16, 16>
    %c1 = matrix.mma %a, %b, %c0 : matrix<subgroup, acc, f32, 16, 16>
    %c2 = matrix.mma %a, %b, %c1 : matrix<subgroup, acc, f32, 16, 16>
    matrix.store %out, %to, %ld, %c2
    return
  }
})");
  ASSERT_TRUE(module);
  runtime::Runtime rt = runtime::Runtime::open("cpu");
  runtime::KernelHandle k = rt.load(*module->kernels()[0]);
  std::vector<uint16_t> in(256), id(256, 0);
  for (uint32_t i = 0; i < 256; ++i)
    in[i] = static_cast<uint16_t>(ir::from_double(ir::Scalar::F16, (i % 19) - 9.0));
  for (uint32_t i = 0; i < 16; ++i)
    id[i * 16 + i] = 0x3c00; // 1.0
  runtime::Buffer a = rt.allocate(ir::Scalar::F16, 256), b = rt.allocate(ir::Scalar::F16, 256);
  rt.write(a, in.data(), 512);
  rt.write(b, id.data(), 512);
  runtime::Buffer out = rt.upload(std::vector<float>(256, -1.0f));
  rt.launch(k, {1, 1, 1}, a, b, out, 0u, 0u); // in bounds: runs
  std::vector<float> got = rt.download<float>(out);
  for (uint32_t i = 0; i < 256; ++i)
    ASSERT_EQ(got[i], 2.0f * static_cast<float>((i % 19) - 9.0)) << "element " << i;
  EXPECT_THAT(
      [&] {
        rt.launch(k, {1, 1, 1}, a, b, out, 1u, 0u);
      },
      ::testing::ThrowsMessage<Error>(
          HasSubstr("cpu: kernel 'tile': parameter 0 ('in'), a load at index 256 of 256 "
                    "elements (checked mode")));
  EXPECT_THAT(
      [&] {
        rt.launch(k, {1, 1, 1}, a, b, out, 0u, 16u);
      },
      ::testing::ThrowsMessage<Error>(
          HasSubstr("cpu: kernel 'tile': parameter 2 ('out'), a store at index 256 of "
                    "256 elements (checked mode")));
}

TEST(CpuDevice, a_damaged_cache_file_is_not_trusted) {
  TemporaryFolder folder;
  ScopedEnv cache("CUBECC_CACHE_DIR", folder.path().c_str());
  ScopedEnv checked("CUBECC_CHECKED", nullptr);
  Fixture f;
  auto device = open_cpu();
  runtime::CpuObjectCache objects(runtime::user_cache_directory());
  std::string key = runtime::cpu_object_cache_key(f.kernel(), device->info().arch, false);
  std::string object = fixture_object(device->info().subgroup_size);
  // A whole file whose object is garbled (its checksum made to agree): the ELF check refuses it.
  std::string garbled = object;
  garbled[0] = 'X';
  objects.store(key, garbled);
  auto compile = [&] { return device->compile(f.kernel()); };
  if (codegen::llvm_version().empty()) {
    // Without the LLVM backend the kernel cannot be compiled again; it must not load either.
    EXPECT_THAT(compile, ::testing::ThrowsMessage<Error>(HasSubstr("cannot compile")));
  } else {
    EXPECT_NE(compile(), nullptr);
    std::string why;
    std::string file = test::read_file(objects.path_of(key));
    EXPECT_TRUE(runtime::CpuObjectCache::decode(file, key, why)) << why; // rewritten
  }
}

TEST(CpuDevice, the_cache_key_changes_with_level_checked_mode_and_kernel) {
  Fixture f;
  auto module = test::example_module("axpy.cir");
  std::string key = runtime::cpu_object_cache_key(f.kernel(), "x86-64-v3", false);
  EXPECT_NE(key, runtime::cpu_object_cache_key(f.kernel(), "x86-64-v2", false));
  EXPECT_NE(key, runtime::cpu_object_cache_key(f.kernel(), "x86-64-v3", true));
  EXPECT_NE(key, runtime::cpu_object_cache_key(*module->kernels().front(), "x86-64-v3", false));
  EXPECT_THAT(key, HasSubstr(std::string(cubecc::version())));
}

//===- Choosing a device ---------------------------------------------------------------------===//

TEST(DevicePreference, a_gpu_then_cpu_then_a_vulkan_cpu_implementation_then_interp) {
  ScopedEnv unset("CUBECC_DEVICE", nullptr);
  std::vector<runtime::DeviceEntry> entries = runtime::list_devices();
  auto class_of = [&](const char *backend) -> std::optional<runtime::DeviceClass> {
    for (const runtime::DeviceEntry &e : entries)
      if (e.backend == backend && e.info)
        return e.info->device_class;
    return std::nullopt;
  };
  ASSERT_EQ(class_of("cpu"), runtime::DeviceClass::Cpu);
  ASSERT_EQ(class_of("interp"), runtime::DeviceClass::Software);
  bool gpu = class_of("cuda") || class_of("hip") || class_of("vulkan") == runtime::DeviceClass::Gpu;
  std::unique_ptr<runtime::Device> best = runtime::open_device("");
  if (gpu) {
    EXPECT_EQ(best->info().device_class, runtime::DeviceClass::Gpu);
  } else {
    EXPECT_EQ(best->info().backend, "cpu"); // before lavapipe, which is a CPU implementation
    if (std::optional<runtime::DeviceClass> vulkan = class_of("vulkan")) {
      EXPECT_EQ(*vulkan, runtime::DeviceClass::Software);
    }
  }
  EXPECT_STREQ(runtime::device_class_name(runtime::DeviceClass::Software), "software");
}

} // namespace
} // namespace cubecc
