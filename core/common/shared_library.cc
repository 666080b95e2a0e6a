#include "core/common/shared_library.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>

#include "core/common/check.h"

namespace mddp {
namespace {

std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Every path `pattern` matches, sorted (glob's order), none when it matches nothing.
std::vector<std::string> matches(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// The non-empty entries of a colon-separated list (PATH, PYTHONPATH).
std::vector<std::string> path_list(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start < list.size();) {
    const size_t end = std::min(list.find(':', start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Where pip, a virtual environment, conda and Debian put Python packages.
std::vector<std::string> python_package_folders() {
  std::vector<std::string> patterns;
  for (const char* prefix_var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const std::string prefix = env_or(prefix_var); !prefix.empty())
      patterns.push_back(prefix + "/lib/python3*/site-packages");
  for (std::string& entry : path_list(env_or("PYTHONPATH"))) patterns.push_back(std::move(entry));
  if (const std::string home = env_or("HOME"); !home.empty())
    patterns.push_back(home + "/.local/lib/python3*/site-packages");
  // The python3 a user runs (first on PATH) may be a virtual environment's
  // that was never activated (container images set PATH alone): its packages.
  for (const std::string& bin : path_list(env_or("PATH"))) {
    std::error_code ec;
    if (!std::filesystem::exists(bin + "/python3", ec)) continue;
    patterns.push_back(bin + "/../lib/python3*/site-packages");
    break;
  }
  for (const char* p : {"/usr/local/lib/python3*/dist-packages",
                        "/usr/local/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
                        "/usr/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"})
    patterns.emplace_back(p);
  std::vector<std::string> out;
  for (const std::string& p : patterns)
    for (std::string& m : matches(p)) out.push_back(std::move(m));
  return out;
}

std::vector<std::string> toolkit_folders() {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const std::string root = env_or(var); !root.empty()) roots.push_back(root);
  roots.emplace_back("/usr/local/cuda");
  std::vector<std::string> out;
  for (const std::string& root : roots)
    for (const char* lib : {"/lib64", "/lib"}) out.push_back(root + lib);
  return out;
}

}  // namespace

std::vector<std::string> library_candidates(const LibrarySearch& s) {
  std::vector<std::string> folders;
  // nvidia/<wheel>/lib up to CUDA 12's wheels; nvidia/cu13/lib holds every library of CUDA 13's.
  if (!s.wheel.empty())
    for (const std::string& site : python_package_folders()) {
      folders.push_back(site + "/nvidia/" + s.wheel + "/lib");
      for (std::string& f : matches(site + "/nvidia/cu[0-9]*/lib")) folders.push_back(std::move(f));
    }
  for (std::string& f : toolkit_folders()) folders.push_back(std::move(f));
  std::vector<std::string> out;
  auto add = [&](const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return;
    for (const std::string& seen : out)
      if (std::filesystem::equivalent(seen, path, ec)) return;
    out.push_back(path);
  };
  for (const std::string& folder : folders) add(folder + "/" + s.soname);
  if (!s.built_with.empty()) add(s.built_with);
  return out;
}

void* open_library(const LibrarySearch& s) {
  std::vector<std::string> tried;
  auto attempt = [&](const std::string& name, const std::string& where) -> void* {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* err = dlerror();
    tried.push_back(str(where, ": ", err ? err : "not loadable"));
    return nullptr;
  };
  if (const std::string path = env_or(s.env.c_str()); !s.env.empty() && !path.empty()) {
    if (void* lib = attempt(path, str(s.env, "=", path))) return lib;
    throw InputError(str("cannot load ", s.what, " from ", tried.back(), ": fix or unset ", s.env));
  }
  if (void* lib = attempt(s.soname, str(s.soname, " (LD_LIBRARY_PATH and the system's)")))
    return lib;
  for (const std::string& path : library_candidates(s))
    if (void* lib = attempt(path, path)) return lib;
  std::string message = str("cannot load ", s.what, ": looked for ", s.soname, " in");
  for (const std::string& t : tried) message += "\n  " + t;
  message += str("\n  and nvidia/", s.wheel.empty() ? "*" : s.wheel,
                 "/lib and nvidia/cu*/lib of the Python package folders, lib64/ and lib/ of "
                 "$CUDA_HOME and /usr/local/cuda: none has it");
  if (!s.install_hint.empty()) message += str("\n  hint: ", s.install_hint);
  if (!s.env.empty()) message += str(", or set ", s.env, " to the library's path");
  throw InputError(message);
}

std::string loaded_library_path(const std::string& prefix) {
  struct Search {
    const std::string& prefix;
    std::string found;
  } search{prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& s = *static_cast<Search*>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const std::string file = path.substr(path.find_last_of('/') + 1);
        if (!file.starts_with(s.prefix)) return 0;
        s.found = path;
        return 1;
      },
      &search);
  return search.found;
}

}  // namespace mddp
