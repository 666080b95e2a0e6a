// ThreadSanitizer's suppressions, linked into every test of the TSan build.
//
// oneDNN (the native bf16 GEMM) is a prebuilt library TSan did not
// instrument: it sees the mutexes oneDNN takes but not the atomics oneDNN
// uses to create them once, lazily (a flag spun on, then a pthread mutex or
// rwlock initialised by whichever thread came first). A rank thread that
// locks such a mutex after another rank created it is reported as a race
// although the flag ordered the two; which thread comes first depends on
// scheduling, so the report came and went. Races inside code TSan cannot see
// are not ours to find: any report with a oneDNN frame is dropped. Our own
// buffers passed to oneDNN are thread-local, so no race of ours hides there.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libdnnl.so\n";
}
