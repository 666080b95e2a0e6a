// The text behind `--dataset text:PATH`: which files PATH names, and their
// characters, checked.
//
// Note [Which files]
// ~~~~~~~~~~~~~~~~~~
// PATH is a file or a folder. A file is read whatever its name (a symbolic
// link to one included). A folder is walked recursively, and the corpus is
// every regular file below it in sorted path order, except:
//  * symbolic links, to files or folders: none is followed, so nothing
//    outside PATH is read and nothing twice (Debian's fortunes folder has a
//    link `cookie.u8 -> cookie` beside each file);
//  * names that start with '.', files or folders (.git, .DS_Store);
//  * names that end in ".dat" (the binary index `strfile` writes beside each
//    fortune file);
//  * empty files (they hold no text).
// Every file the rule keeps must be text (below); a binary file it keeps is
// an error naming it, never skipped in silence, so the corpus is exactly
// the files the rule names. The files are joined with one '\n' between two.
//
// A file is text when it holds no NUL byte, is valid UTF-8 (utf8.h) and at
// most one character in ten is a control character other than tab, line
// feed, carriage return and form feed (fortunes uses a few backspaces and
// bells; a binary file that happens to be valid UTF-8 is mostly controls).
#pragma once

#include <string>
#include <vector>

namespace mddp::data {

// The files of the corpus at `path` (Note [Which files]), in order. Throws
// InputError when `path` does not exist or names no file to read.
std::vector<std::string> text_files(const std::string& path);

// The characters of the text file `path`; InputError naming the file when it
// is not text (Note [Which files]).
std::u32string read_text_file(const std::string& path);

// The whole corpus at `path`: its files' characters joined with '\n'.
std::u32string read_corpus(const std::string& path);

}  // namespace mddp::data
