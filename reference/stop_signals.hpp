#pragma once
// SIGINT and SIGTERM held back (for this thread) while the object lives: a
// step that a stop must not cut in two (a file replaced and its count
// updated; a temporary created and registered for removal) runs whole, and a
// signal that arrived meanwhile is delivered when it ends. The mask is the
// calling thread's: a signal the kernel gives another thread that leaves both
// unblocked is not held. The suite's writers run on the main thread, and the
// threads it starts (OpenMP, CUDA's, MPI's) take no stop signals in practice.
#include <pthread.h>
#include <signal.h>

namespace yoco {

class StopSignalsHeld {
 public:
  StopSignalsHeld() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~StopSignalsHeld() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  sigset_t old_;
};

}  // namespace yoco
