// The course's Labs in syllabus order, and their state in a student's
// my_work/: what `microddp lab list|check|reset|solution` works from.
#pragma once

#include <string>
#include <vector>

#include "labs/checks.h"

namespace mddp::labs {

struct Lab {
  int number = 0;
  std::string name;    // "ring_allreduce": the command-line name
  std::string folder;  // "labs/03_ring_allreduce": README, exercise, solution, checker
  std::string title;
  std::string chapter;    // the docs/ chapter it belongs to
  std::string work_file;  // in my_work/: the student's copy of folder/exercise.cc (or answers.toml)
  std::string template_file;           // in folder: what `lab reset` copies
  std::vector<std::string> reference;  // where the reference implementation lives
  std::string explanation;             // how the reference works, for `lab solution`
  void (*check)(const Implementations&, const CheckOptions&, Report&) = nullptr;
};

const std::vector<Lab>& all_labs();
// The Lab called `name`; InputError listing the names otherwise.
const Lab& find_lab(const std::string& name);

// The repository this binary was built from (labs/ is there), and the
// work directory whose files it was built with (my_work/ by default).
std::string source_root();
std::string built_work_dir();

// What `lab list` shows for a Lab: its work file against the template and
// the last check's result (remembered in my_work/.lab-status.json).
std::string lab_status(const Lab& lab, const std::string& root, const std::string& work_dir);
// Remembers a check's result for the work file as it is now. Throws
// InputError when the work directory cannot be written.
void record_check(const Lab& lab, const std::string& work_dir, bool passed);

}  // namespace mddp::labs
