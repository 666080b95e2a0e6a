#include "core/data/text_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/common/check.h"
#include "core/data/utf8.h"

namespace mddp::data {
namespace {

namespace fs = std::filesystem;

// Control characters other than the four that lay out text (Note [Which files]).
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r' || c == '\f') return false;
  return c < 0x20 || (c >= 0x7F && c <= 0x9F);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str(path, ": cannot open for reading (", std::strerror(errno), ")"));
  in.seekg(0, std::ios::end);
  std::string bytes(static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw InputError(str(path, ": read error (", std::strerror(errno), ")"));
  return bytes;
}

// Whether the walk keeps `e` as a file of the corpus (hidden names are the
// caller's: it prunes hidden folders). Links are never followed.
bool kept_in_corpus(const fs::directory_entry& e, std::error_code& ec) {
  if (e.path().filename().string().ends_with(".dat")) return false;
  if (e.is_symlink(ec) || !e.is_regular_file(ec)) return false;
  return e.file_size(ec) > 0;
}

// The folder's files under Note [Which files], sorted component by component.
std::vector<std::string> folder_files(const std::string& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with('.')) {
      it.disable_recursion_pending();  // a hidden folder is skipped whole
      continue;
    }
    if (kept_in_corpus(*it, ec)) found.push_back(it->path());
  }
  if (ec) throw InputError(str(dir, ": cannot list the folder (", ec.message(), ")"));
  if (found.empty())
    throw InputError(str(dir,
                         ": the folder holds no file to read (symbolic links, hidden names, "
                         "*.dat and empty files are skipped)"));
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (const fs::path& p : found) files.push_back(p.string());
  return files;
}

}  // namespace

std::vector<std::string> text_files(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows a link: PATH was named
  if (!fs::exists(status))
    throw InputError(str(path,
                         ": no such file or folder (--dataset text:PATH reads a text file "
                         "or a folder of them)"));
  if (fs::is_directory(status)) return folder_files(path);
  if (!fs::is_regular_file(status)) throw InputError(str(path, ": not a regular file or folder"));
  if (fs::file_size(path, ec) == 0 && !ec) throw InputError(str(path, ": empty file"));
  return {path};
}

std::u32string read_text_file(const std::string& path) {
  const std::string bytes = read_whole_file(path);
  if (const auto nul = bytes.find('\0'); nul != std::string::npos)
    throw InputError(str(path, ": a binary file (a NUL byte at offset ", nul,
                         "); --dataset text:PATH reads UTF-8 text"));
  std::u32string text = decode_utf8(bytes, path);
  const auto controls = std::count_if(text.begin(), text.end(), is_control);
  if (controls * 10 > static_cast<std::ptrdiff_t>(text.size()))
    throw InputError(str(path, ": looks binary: ", controls, " of its ", text.size(),
                         " characters are control characters; --dataset text:PATH reads text"));
  return text;
}

std::u32string read_corpus(const std::string& path) {
  std::u32string corpus;
  for (const std::string& file : text_files(path)) {
    if (!corpus.empty()) corpus.push_back(U'\n');
    corpus += read_text_file(file);
  }
  return corpus;
}

}  // namespace mddp::data
