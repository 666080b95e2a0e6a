// Opening a shared library that only some machines have (NCCL and cuBLAS,
// on GPU machines) when it is first needed, instead of linking it: the same
// binary then starts everywhere, and a machine that lacks the library hears
// which one, and where it was looked for, only when it asks for a GPU.
//
// Looked for the way PyTorch finds its CUDA libraries, first hit wins:
//   1. the path in the environment variable `env` (MDDP_NCCL_LIBRARY, ...);
//   2. the soname through the dynamic loader (LD_LIBRARY_PATH, the binary's
//      run path, ld.so.cache): what an installed toolkit or package gives;
//   3. nvidia/<wheel>/lib (CUDA 12's wheels) and nvidia/cu*/lib (CUDA 13's)
//      in the Python package folders (an active virtual environment or conda,
//      PYTHONPATH, ~/.local, the first python3 on PATH's, the system's): the
//      nvidia-* wheels PyTorch's pip install brings;
//   4. lib64/ and lib/ of a CUDA toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda);
//   5. the copy the build was compiled against.
#pragma once

#include <string>
#include <vector>

namespace mddp {

struct LibrarySearch {
  std::string what;          // "NCCL": for the error message
  std::string soname;        // "libnccl.so.2"
  std::string env;           // "MDDP_NCCL_LIBRARY": a path that wins; empty: none
  std::string wheel;         // "nccl": nvidia/nccl/lib in a Python package folder; empty: none
  std::string built_with;    // the build's own copy; empty: none
  std::string install_hint;  // "pip install nvidia-nccl-cu13", for the error message
};

// The files to try after the soname, in order (steps 3 to 5 above; those
// that exist only). Step 1 comes first when `env` is set.
std::vector<std::string> library_candidates(const LibrarySearch& search);

// dlopen()s the first that loads (RTLD_NOW | RTLD_LOCAL); the handle lives
// as long as the process. Throws InputError naming every place it looked
// and why each failed.
void* open_library(const LibrarySearch& search);

// The path this process loaded a library from whose file name starts with
// `prefix` ("libnccl.so"), or "" when none is loaded: what `microddp gpu`
// reports after opening NCCL and cuBLAS.
std::string loaded_library_path(const std::string& prefix);

}  // namespace mddp
