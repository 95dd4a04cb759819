//===- record.cpp - Tuning records: fingerprints, keys, JSON ----------------------------------===//
#include "cubecc/autotune/record.h"

#include "cubecc/ir/version.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <ctime>
#include <set>

namespace cubecc::autotune {

namespace {

using Json = nlohmann::json;

constexpr std::string_view kFormat = "cubecc-tuning-record";
constexpr int kFormatVersion = 1;

/// Joins fields with '|', escaping '\' and '|' inside them, so that the result is injective.
std::string join_escaped(std::initializer_list<std::string_view> fields) {
  std::string out;
  bool first = true;
  for (std::string_view field : fields) {
    if (!first)
      out += '|';
    first = false;
    for (char c : field) {
      if (c == '\\' || c == '|')
        out += '\\';
      out += c;
    }
  }
  return out;
}

} // namespace

std::string device_fingerprint(const runtime::DeviceInfo &info) {
  return join_escaped({info.backend, info.vendor, info.name, info.arch, info.driver});
}

std::string record_key(std::string_view tunable, std::string_view bucket,
                       std::string_view device_fingerprint) {
  return "tuning/v1|" + join_escaped({tunable, bucket, device_fingerprint});
}

namespace {

/// Whether `text` is "YYYY-MM-DDTHH:MM:SSZ" naming a real instant (utc_timestamp's form; a leap
/// second's :60 allowed).
bool is_utc_timestamp(std::string_view text) {
  if (text.size() != 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != 'Z')
    return false;
  auto number = [&](size_t at, size_t digits, int &out) {
    out = 0;
    for (size_t i = at; i < at + digits; ++i) {
      if (text[i] < '0' || text[i] > '9')
        return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  int year, month, day, hour, minute, second;
  if (!number(0, 4, year) || !number(5, 2, month) || !number(8, 2, day) || !number(11, 2, hour) ||
      !number(14, 2, minute) || !number(17, 2, second))
    return false;
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 60)
    return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return day <= kDays[month - 1] + (month == 2 && leap);
}

} // namespace

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string to_json(const TuningRecord &record) {
  Json timings = Json::array();
  for (const VariantTiming &t : record.timings)
    timings.push_back({{"configuration", t.configuration},
                       {"median_ns", t.median_ns},
                       {"min_ns", t.min_ns},
                       {"samples", t.samples},
                       {"eliminated", t.eliminated},
                       {"invalid", t.invalid},
                       {"note", t.note}});
  Json out = {{"format", kFormat},
              {"version", kFormatVersion},
              {"tunable", record.tunable},
              {"bucket", record.bucket},
              {"device", record.device},
              {"configuration", record.configuration},
              {"cubecc_version", record.cubecc_version},
              {"created", record.created},
              {"timings", std::move(timings)}};
  // Invalid UTF-8 (a driver's odd device name) is replaced rather than thrown on.
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

/// Reads the fields of one JSON object strictly: each exactly once, of its type; finish()
/// reports fields it did not read.
class StrictObject {
public:
  StrictObject(const Json &object, std::string where, std::string &error)
      : object_(object), where_(std::move(where)), error_(error) {
    if (!object.is_object())
      fail(fmt::format("{} is not an object", where_));
  }
  bool ok() const { return ok_; }

  std::string string(const char *name) {
    const Json *v = field(name);
    if (v && !v->is_string())
      fail(fmt::format("{}: '{}' is not a string", where_, name));
    return v && ok_ ? v->get<std::string>() : std::string();
  }
  bool boolean(const char *name) {
    const Json *v = field(name);
    if (v && !v->is_boolean())
      fail(fmt::format("{}: '{}' is not true or false", where_, name));
    return v && ok_ && v->get<bool>();
  }
  double nonnegative_number(const char *name) {
    const Json *v = field(name);
    if (v && !v->is_number())
      fail(fmt::format("{}: '{}' is not a number", where_, name));
    double d = v && ok_ ? v->get<double>() : 0;
    if (ok_ && !(std::isfinite(d) && d >= 0))
      fail(fmt::format("{}: '{}' is not a finite number >= 0", where_, name));
    return d;
  }
  uint64_t unsigned_integer(const char *name, uint64_t max) {
    const Json *v = field(name);
    if (v && !(v->is_number_unsigned() || (v->is_number_integer() && v->get<int64_t>() >= 0)))
      fail(fmt::format("{}: '{}' is not an integer >= 0", where_, name));
    uint64_t u = v && ok_ ? v->get<uint64_t>() : 0;
    if (ok_ && u > max)
      fail(fmt::format("{}: '{}' is larger than {}", where_, name, max));
    return u;
  }
  const Json *array(const char *name) {
    const Json *v = field(name);
    if (v && !v->is_array())
      fail(fmt::format("{}: '{}' is not an array", where_, name));
    return ok_ ? v : nullptr;
  }
  /// Fails on a field that none of the reads above named.
  bool finish() {
    if (ok_)
      for (const auto &[key, value] : object_.items())
        if (!read_.count(key))
          return fail(fmt::format("{}: unknown field '{}'", where_, key));
    return ok_;
  }
  bool fail(const std::string &message) {
    if (ok_)
      error_ = message;
    ok_ = false;
    return false;
  }

private:
  const Json *field(const char *name) {
    if (!ok_)
      return nullptr;
    read_.insert(name);
    auto it = object_.find(name);
    if (it == object_.end()) {
      fail(fmt::format("{}: missing field '{}'", where_, name));
      return nullptr;
    }
    return &*it;
  }

  const Json &object_;
  std::string where_;
  std::string &error_;
  std::set<std::string> read_;
  bool ok_ = true;
};

} // namespace

std::optional<TuningRecord> parse_record(std::string_view text, std::string &error) {
  try {
    // Strict JSON: no comments, nothing after the value (whitespace aside).
    Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                            /*ignore_comments=*/false);
    TuningRecord record;
    StrictObject object(json, "tuning record", error);
    std::string format = object.string("format");
    if (object.ok() && format != kFormat)
      object.fail(fmt::format("tuning record: 'format' is '{}', not '{}'", format, kFormat));
    uint64_t version = object.unsigned_integer("version", UINT32_MAX);
    if (object.ok() && version != kFormatVersion)
      object.fail(fmt::format("tuning record: format version {} (this cubecc reads {})", version,
                              kFormatVersion));
    record.tunable = object.string("tunable");
    record.bucket = object.string("bucket");
    record.device = object.string("device");
    record.configuration = object.string("configuration");
    record.cubecc_version = object.string("cubecc_version");
    record.created = object.string("created");
    const Json *timings = object.array("timings");
    if (!object.ok())
      return std::nullopt;
    for (size_t i = 0; i < timings->size(); ++i) {
      StrictObject t((*timings)[i], fmt::format("tuning record: timings[{}]", i), error);
      VariantTiming timing;
      timing.configuration = t.string("configuration");
      timing.median_ns = t.nonnegative_number("median_ns");
      timing.min_ns = t.nonnegative_number("min_ns");
      timing.samples = static_cast<uint32_t>(t.unsigned_integer("samples", UINT32_MAX));
      timing.eliminated = t.boolean("eliminated");
      timing.invalid = t.boolean("invalid");
      timing.note = t.string("note");
      if (!t.finish())
        return std::nullopt;
      record.timings.push_back(std::move(timing));
    }
    if (!object.finish())
      return std::nullopt;
    if (record.tunable.empty() || record.configuration.empty()) {
      error = "tuning record: empty 'tunable' or 'configuration'";
      return std::nullopt;
    }
    if (!record.created.empty() && !is_utc_timestamp(record.created)) {
      error = fmt::format("tuning record: 'created' is '{}', not a UTC time such as "
                          "2026-12-04T15:00:00Z",
                          record.created);
      return std::nullopt;
    }
    for (const VariantTiming &t : record.timings)
      if (t.min_ns > t.median_ns) {
        error = fmt::format("tuning record: timing of '{}' has min_ns {} above its median_ns {}",
                            t.configuration, t.min_ns, t.median_ns);
        return std::nullopt;
      }
    std::set<std::string_view> seen;
    const VariantTiming *winner = nullptr;
    for (const VariantTiming &t : record.timings) {
      if (!seen.insert(t.configuration).second) {
        error = fmt::format("tuning record: two timings of configuration '{}'", t.configuration);
        return std::nullopt;
      }
      if (t.configuration == record.configuration)
        winner = &t;
    }
    if (!winner || winner->invalid || winner->eliminated || winner->samples == 0) {
      error = fmt::format("tuning record: the winner '{}' is not a timed, valid variant of its "
                          "timings",
                          record.configuration);
      return std::nullopt;
    }
    return record;
  } catch (const std::exception &e) {
    error = fmt::format("tuning record: {}", e.what());
    return std::nullopt;
  }
}

} // namespace cubecc::autotune
