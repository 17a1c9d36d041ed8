// One environment variable set (a value) or unset (nullptr) for the scope of
// a test, restored after, also when the test fails; no rank thread may run
// while it changes (setenv(3) is not thread-safe against getenv).
#pragma once

#include <cstdlib>
#include <string>

namespace weft::coll::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = ::getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const char* value) const {
    if (value) {
      ::setenv(name_, value, 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace weft::coll::testing
