// open_library (core/common/shared_library.h): the order of the places a
// library is looked for, the environment variable that wins, and an error
// that names every place it looked. The files are made here (empty ones
// where only the order is checked; this process's own libm where one must
// load), so the test needs no GPU library.
#include "core/common/shared_library.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/common/check.h"
#include "core/common/temp_dir.h"

namespace fs = std::filesystem;
using mddp::LibrarySearch;

namespace {

constexpr const char* kSoname = "libmddp-absent.so.7";

// The environment this test controls, cleared of what the machine may have set.
class SharedLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = mddp::make_temp_dir("mddp-shared-library");
    for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH",
                            "MDDP_TEST_LIBRARY"})
      unsetenv(var);
    setenv("HOME", dir_.c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path touch(const fs::path& relative) {
    const fs::path p = dir_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "not a shared library";
    return p;
  }
  LibrarySearch search() const {
    return {.what = "Fake",
            .soname = kSoname,
            .env = "MDDP_TEST_LIBRARY",
            .wheel = "fake",
            .built_with = "",
            .install_hint = "install fake"};
  }

  fs::path dir_;
};

// A real library to load under other names: libm, which every C++ program
// has loaded and which has no thread-local storage (a second copy of libc
// would need static TLS, and ThreadSanitizer's runtime leaves none spare).
std::string loadable_library() {
  const std::string libm = mddp::loaded_library_path("libm.so");
  EXPECT_FALSE(libm.empty());
  return libm;
}

TEST_F(SharedLibraryTest, CandidatesGoWheelThenCuda13WheelThenToolkitThenTheBuildsCopy) {
  setenv("VIRTUAL_ENV", (dir_ / "venv").c_str(), 1);
  setenv("CUDA_HOME", (dir_ / "cuda").c_str(), 1);
  const fs::path site = "venv/lib/python3.12/site-packages/nvidia";
  const fs::path wheel = touch(site / "fake/lib" / kSoname);
  const fs::path cu13 = touch(site / "cu13/lib" / kSoname);
  const fs::path toolkit = touch(fs::path("cuda/lib64") / kSoname);
  const fs::path built = touch("build/libfake.so");
  touch(site / "other/lib" / kSoname);  // another wheel's folder is not looked in
  LibrarySearch s = search();
  s.built_with = built.string();
  EXPECT_EQ(mddp::library_candidates(s), (std::vector<std::string>{wheel, cu13, toolkit, built}));
}

TEST_F(SharedLibraryTest, TheFirstPython3OnThePathLendsItsPackages) {
  const fs::path site = "venv/lib/python3.12/site-packages/nvidia";
  const fs::path wheel = touch(site / "fake/lib" / kSoname);
  touch("venv/bin/python3");
  touch("later/bin/python3");
  touch(fs::path("later/lib/python3.12/site-packages/nvidia/fake/lib") / kSoname);  // not first
  const char* saved = getenv("PATH");
  const std::string old_path = saved ? saved : "";
  setenv("PATH",
         ((dir_ / "nothing").string() + ":" + (dir_ / "venv/bin").string() + ":" +
          (dir_ / "later/bin").string())
             .c_str(),
         1);
  const std::vector<std::string> found = mddp::library_candidates(search());
  setenv("PATH", old_path.c_str(), 1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(fs::equivalent(found[0], wheel)) << found[0];
}

TEST_F(SharedLibraryTest, AFileFoundTwiceIsTriedOnce) {
  setenv("CUDA_HOME", (dir_ / "cuda").c_str(), 1);
  const fs::path toolkit = touch(fs::path("cuda/lib") / kSoname);
  LibrarySearch s = search();
  s.built_with = toolkit.string();
  EXPECT_EQ(mddp::library_candidates(s), std::vector<std::string>{toolkit});
}

TEST_F(SharedLibraryTest, TheEnvironmentVariableWins) {
  setenv("MDDP_TEST_LIBRARY", loadable_library().c_str(), 1);
  EXPECT_NE(mddp::open_library(search()), nullptr);
}

TEST_F(SharedLibraryTest, ABadEnvironmentVariableIsAnErrorNotAFallBack) {
  setenv("MDDP_TEST_LIBRARY", (dir_ / "nowhere.so").c_str(), 1);
  setenv("CUDA_HOME", (dir_ / "cuda").c_str(), 1);
  fs::create_directories(dir_ / "cuda/lib64");
  fs::copy_file(loadable_library(), dir_ / "cuda/lib64" / kSoname);  // loadable, but not asked for
  try {
    mddp::open_library(search());
    FAIL() << "loaded a library the environment did not name";
  } catch (const mddp::InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MDDP_TEST_LIBRARY=" + (dir_ / "nowhere.so").string()), std::string::npos)
        << what;
    EXPECT_NE(what.find("fix or unset MDDP_TEST_LIBRARY"), std::string::npos) << what;
  }
}

TEST_F(SharedLibraryTest, AFoundCandidateLoads) {
  setenv("CUDA_HOME", (dir_ / "cuda").c_str(), 1);
  fs::create_directories(dir_ / "cuda/lib64");
  fs::copy_file(loadable_library(), dir_ / "cuda/lib64" / kSoname);
  EXPECT_NE(mddp::open_library(search()), nullptr);
}

TEST_F(SharedLibraryTest, NothingLoadsTheErrorNamesEveryPlaceAndTheHint) {
  setenv("CUDA_HOME", (dir_ / "cuda").c_str(), 1);
  const fs::path broken = touch(fs::path("cuda/lib64") / kSoname);
  try {
    mddp::open_library(search());
    FAIL() << "loaded a library that is not there";
  } catch (const mddp::InputError& e) {
    const std::string what = e.what();
    for (const std::string& part :
         {std::string("cannot load Fake: looked for ") + kSoname, std::string(kSoname) + " (LD_",
          broken.string() + ": ", std::string("nvidia/fake/lib"), std::string("hint: install fake"),
          std::string("or set MDDP_TEST_LIBRARY")})
      EXPECT_NE(what.find(part), std::string::npos) << "no '" << part << "' in: " << what;
  }
}

TEST_F(SharedLibraryTest, TheLoadedPathOfALibraryIsFoundByItsNamesStart) {
  const std::string libc = mddp::loaded_library_path("libc.so");
  EXPECT_NE(libc.find("libc.so"), std::string::npos) << libc;
  EXPECT_TRUE(fs::exists(libc)) << libc;
  EXPECT_EQ(mddp::loaded_library_path("libmddp-never-loaded.so"), "");
}

}  // namespace
