#include "coordinator/flag_config.h"

#include <toml++/toml.h>

#include <cstdio>
#include <vector>

#include "core/common/check.h"

namespace mddp::coordinator {
namespace {

// One TOML value as the string CLI11 would have read on the command line;
// false when it is not a scalar.
bool scalar_text(const toml::node& n, std::string& out) {
  if (auto s = n.value_exact<std::string>()) {
    out = *s;
  } else if (auto i = n.value_exact<int64_t>()) {
    out = std::to_string(*i);
  } else if (auto d = n.value_exact<double>()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *d);
    out = buf;
  } else if (auto b = n.value_exact<bool>()) {
    out = *b ? "true" : "false";
  } else {
    return false;
  }
  return true;
}

}  // namespace

void apply_toml_config(CLI::App& cmd, const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw InputError(str(path, ":", where.line, ":", where.column, ": ", e.description()));
  }
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    CLI::Option* opt = cmd.get_option_no_throw("--" + name);
    if (opt == nullptr || !opt->get_configurable())
      throw InputError(str(path, ": unknown key '", name, "' (keys are the flags of `microddp ",
                           cmd.get_name(), "` without the leading --, e.g. world-size = 4)"));
    if (opt->count() > 0) continue;  // the command line wins
    std::vector<std::string> values;
    std::string text;
    if (const toml::array* arr = node.as_array()) {
      for (const auto& e : *arr) {
        if (!scalar_text(e, text))
          throw InputError(str(path, ": '", name, "' must be a list of plain values"));
        values.push_back(text);
      }
    } else if (scalar_text(node, text)) {
      values.push_back(text);
    } else {
      throw InputError(
          str(path, ": '", name,
              "' must be a value or a list (no tables: write flags as top-level keys)"));
    }
    try {
      if (opt->get_expected_min() ==
          0) {  // a flag: "true" / "false", negated for "!--no-x" flags as CLI11 does
        if (values.size() != 1)
          throw InputError(str(path, ": '", name, "' is a flag: give true or false"));
        opt->add_result(opt->get_flag_value(name, values[0]));
      } else {
        opt->add_result(values);
      }
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw InputError(str(path, ": ", name, " = ", text, ": ", e.what()));
    }
  }
}

}  // namespace mddp::coordinator
