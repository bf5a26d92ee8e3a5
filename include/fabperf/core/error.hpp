// Typed errors. Every message names the operation and the object it was applied to, so a user
// reading one line knows what failed where. Exit codes are part of the CLI contract (docs/usage.md).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace fabperf {

enum class ExitCode : int {
  ok = 0,
  kpi_failed = 1,      // the test ran and a threshold was not met
  usage = 2,           // bad command line, plan or value: nothing was started
  infrastructure = 3,  // an agent unreachable, lost or misbehaving; results may be partial
  internal = 4,        // a bug in fabperf
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// A mistake in what the user asked for (CLI option, value, plan file).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::usage, message) {}
};

// A peer sent something that violates the control or data protocol.
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& message) : Error(ExitCode::infrastructure, message) {}
};

// A network or system operation failed (connect, bind, read, ...).
class SystemError : public Error {
 public:
  SystemError(std::string_view operation, std::string_view object, int err);
  SystemError(std::string_view operation, std::string_view object, std::string_view reason);
};

// A peer or an operation gave no answer within its deadline (the connection itself may be
// fine): the coordinator reports such a node as stalled rather than lost.
class TimeoutError : public SystemError {
 public:
  using SystemError::SystemError;
};

// A verbs or rdma_cm call failed: the call, the device (or the address it was for) and errno,
// as fields for callers that decide by them and as the message "ibv_create_qp: Cannot allocate
// memory on rxe0:1".
class VerbsError : public Error {
 public:
  VerbsError(std::string call, std::string device, int err, const std::string& message)
      : Error(ExitCode::infrastructure, message), call_(std::move(call)), device_(std::move(device)), err_(err) {}
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  [[nodiscard]] const std::string& device() const noexcept { return device_; }
  [[nodiscard]] int err() const noexcept { return err_; }

 private:
  std::string call_;
  std::string device_;
  int err_;
};

// "connect 10.0.0.1:6668: Connection refused" — errno text for err.
std::string errno_text(int err);

// A whole file; UsageError "WHAT PATH: cannot be read (errno text)" when it cannot be opened.
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace fabperf
