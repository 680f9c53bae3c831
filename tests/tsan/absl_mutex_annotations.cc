// Makes absl::Mutex visible to ThreadSanitizer when Abseil itself is not
// built with it (Debian's is not): without this, TSan sees none of its locks
// and reports every access an absl::Mutex guards as a race.
//
// Loaded with LD_PRELOAD in the thread build (.ci/sanitize.sh thread), so it
// covers the test binaries and the metricsd and metrics-agent processes
// they start. Its definitions of absl::Mutex's and absl::CondVar's
// out-of-line members come before libabsl_synchronization's in symbol
// lookup (the library's own calls between them also go through its PLT);
// each calls the library's (dlsym RTLD_NEXT) between the annotations that
// an Abseil built with TSan makes itself: a release before unlocking, an
// acquire after locking, both around a wait. ~Mutex is left alone: TSan
// forgets a mutex when its memory is freed, and annotating the destruction
// of gRPC's own mutexes would report gRPC's ordering, which it cannot see. Conditions are evaluated with
// TSan ignoring their reads: Abseil evaluates a waiter's condition under
// the lock but in whichever thread holds it, which TSan cannot tell.
//
// Not instrumented itself; the __tsan_* entry points are weak, so a process
// without TSan (postgres, python) loads it and never calls them.
//
// The symbols are Abseil 20220623 as Debian 12 names it (inline namespace
// "debian3"). Another Abseil would leave them unmatched: then the thread
// build reports its false races again, loudly, rather than missing real
// ones.
//
// Thread-safety: thread-safe (each real entry point is looked up once).
#include <dlfcn.h>

#include <cstdint>

extern "C" {
void __tsan_mutex_pre_lock(void* addr, unsigned flags) __attribute__((weak));
void __tsan_mutex_post_lock(void* addr, unsigned flags, int recursion)
    __attribute__((weak));
int __tsan_mutex_pre_unlock(void* addr, unsigned flags) __attribute__((weak));
void __tsan_mutex_post_unlock(void* addr, unsigned flags) __attribute__((weak));
void AnnotateIgnoreReadsBegin(const char* file, int line) __attribute__((weak));
void AnnotateIgnoreReadsEnd(const char* file, int line) __attribute__((weak));
}

namespace {

// As the TSan interface header defines them.
constexpr unsigned kReadLock = 1 << 3;
constexpr unsigned kTryLock = 1 << 4;
constexpr unsigned kTryLockFailed = 1 << 5;

// absl::Time: 16 bytes, trivially copyable, so passed
// in two registers like this.
struct Opaque16 {
  int64_t a;
  int64_t b;
};

bool Annotating() { return __tsan_mutex_pre_lock != nullptr; }

void PreLock(void* mu, unsigned flags) {
  if (Annotating()) __tsan_mutex_pre_lock(mu, flags);
}
void PostLock(void* mu, unsigned flags) {
  if (Annotating()) __tsan_mutex_post_lock(mu, flags, 0);
}
void PreUnlock(void* mu, unsigned flags) {
  if (Annotating()) __tsan_mutex_pre_unlock(mu, flags);
}
void PostUnlock(void* mu, unsigned flags) {
  if (Annotating()) __tsan_mutex_post_unlock(mu, flags);
}

template <typename F>
F Real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

// Each entry point: its mangled name, the library's function, the wrapper.
#define REAL(type, symbol)                            \
  static const auto real = Real<type>(#symbol);

extern "C" {

// absl::Mutex::Lock() and friends: acquire after.
#define LOCK(symbol, flags)                           \
  void symbol(void* mu) {                             \
    REAL(void (*)(void*), symbol)                     \
    PreLock(mu, flags);                               \
    real(mu);                                         \
    PostLock(mu, flags);                              \
  }
LOCK(_ZN4absl7debian35Mutex4LockEv, 0)
LOCK(_ZN4absl7debian35Mutex10ReaderLockEv, kReadLock)
#undef LOCK

#define TRY_LOCK(symbol, flags)                                     \
  bool symbol(void* mu) {                                           \
    REAL(bool (*)(void*), symbol)                                   \
    PreLock(mu, flags | kTryLock);                                  \
    const bool locked = real(mu);                                   \
    PostLock(mu, flags | kTryLock | (locked ? 0 : kTryLockFailed)); \
    return locked;                                                  \
  }
TRY_LOCK(_ZN4absl7debian35Mutex7TryLockEv, 0)
TRY_LOCK(_ZN4absl7debian35Mutex13ReaderTryLockEv, kReadLock)
#undef TRY_LOCK

// absl::Mutex::Unlock() and ReaderUnlock(): release before.
#define UNLOCK(symbol, flags)                         \
  void symbol(void* mu) {                             \
    REAL(void (*)(void*), symbol)                     \
    PreUnlock(mu, flags);                             \
    real(mu);                                         \
    PostUnlock(mu, flags);                            \
  }
UNLOCK(_ZN4absl7debian35Mutex6UnlockEv, 0)
UNLOCK(_ZN4absl7debian35Mutex12ReaderUnlockEv, kReadLock)
#undef UNLOCK

// LockWhen(const Condition&) and the deadline forms: locked on return,
// whether or not the condition held. (The timeout forms call the deadline
// forms through the PLT, so they are covered and must not be wrapped too.)
#define LOCK_WHEN(symbol, flags)                                       \
  void symbol(void* mu, const void* condition) {                       \
    REAL(void (*)(void*, const void*), symbol)                         \
    PreLock(mu, flags);                                                \
    real(mu, condition);                                               \
    PostLock(mu, flags);                                               \
  }
#define LOCK_WHEN_WITH_DEADLINE(symbol, flags)                         \
  bool symbol(void* mu, const void* condition, Opaque16 deadline) {    \
    REAL(bool (*)(void*, const void*, Opaque16), symbol)               \
    PreLock(mu, flags);                                                \
    const bool held = real(mu, condition, deadline);                   \
    PostLock(mu, flags);                                               \
    return held;                                                       \
  }
LOCK_WHEN(_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE, 0)
LOCK_WHEN(_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE, kReadLock)
LOCK_WHEN_WITH_DEADLINE(
    _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, 0)
LOCK_WHEN_WITH_DEADLINE(
    _ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE,
    kReadLock)
#undef LOCK_WHEN
#undef LOCK_WHEN_WITH_DEADLINE

// The waits release the (writer) lock and hold it again on return. Every
// Mutex::Await* that waits goes through AwaitCommon, every CondVar::Wait*
// through WaitCommon (KernelTimeout: one int64_t).
bool _ZN4absl7debian35Mutex11AwaitCommonERKNS0_9ConditionENS0_24synchronization_internal13KernelTimeoutE(
    void* mu, const void* condition, int64_t timeout) {
  REAL(bool (*)(void*, const void*, int64_t),
       _ZN4absl7debian35Mutex11AwaitCommonERKNS0_9ConditionENS0_24synchronization_internal13KernelTimeoutE)
  PreUnlock(mu, 0);
  PostUnlock(mu, 0);
  const bool held = real(mu, condition, timeout);
  PreLock(mu, 0);
  PostLock(mu, 0);
  return held;
}

bool _ZN4absl7debian37CondVar10WaitCommonEPNS0_5MutexENS0_24synchronization_internal13KernelTimeoutE(
    void* cv, void* mu, int64_t timeout) {
  REAL(bool (*)(void*, void*, int64_t),
       _ZN4absl7debian37CondVar10WaitCommonEPNS0_5MutexENS0_24synchronization_internal13KernelTimeoutE)
  PreUnlock(mu, 0);
  PostUnlock(mu, 0);
  const bool timed_out = real(cv, mu, timeout);
  PreLock(mu, 0);
  PostLock(mu, 0);
  return timed_out;
}

// absl::Condition::Eval() const.
bool _ZNK4absl7debian39Condition4EvalEv(const void* condition) {
  REAL(bool (*)(const void*), _ZNK4absl7debian39Condition4EvalEv)
  if (!Annotating()) return real(condition);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  const bool holds = real(condition);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  return holds;
}

}  // extern "C"
