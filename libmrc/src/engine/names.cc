// Names of the engine's enums, for logs, errors and tests.
#include "mrc/engine/engine.h"

namespace mrc::engine {

const char* to_string(Error e) {
  switch (e) {
    case Error::kInvalidArgument:
      return "invalid argument";
    case Error::kNoSuchQp:
      return "no such QP";
    case Error::kNoSuchCq:
      return "no such CQ";
    case Error::kNoSuchMr:
      return "no such memory region";
    case Error::kBadState:
      return "not allowed in the QP's state";
    case Error::kQueueFull:
      return "work queue full";
    case Error::kTooLarge:
      return "message too large";
    case Error::kResourceLimit:
      return "resource limit reached";
    case Error::kLocalAccess:
      return "SGE not covered by a local memory region with the needed access";
    case Error::kNotSupported:
      return "not supported";
    case Error::kWimmLimit:
      return "max_wimm WRITE_WITH_IMMs already in flight";
  }
  return "unknown error";
}

const char* to_string(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kSqd:
      return "SQD";
    case QpState::kError:
      return "ERROR";
  }
  return "?";
}

const char* to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kLocLenErr:
      return "local length error";
    case WcStatus::kLocProtErr:
      return "local protection error";
    case WcStatus::kWrFlushErr:
      return "work request flushed";
    case WcStatus::kRemInvReqErr:
      return "remote invalid request";
    case WcStatus::kRemAccessErr:
      return "remote access error";
    case WcStatus::kRemOpErr:
      return "remote operation error";
    case WcStatus::kRetryExcErr:
      return "transport retry counter exceeded";
    case WcStatus::kRnrRetryExcErr:
      return "RNR retry counter exceeded";
    case WcStatus::kTmErr:
      return "tag matching operation failed";
    case WcStatus::kTmRndvIncomplete:
      return "rendezvous incomplete";
  }
  return "?";
}

const char* to_string(Drop d) {
  switch (d) {
    case Drop::kMalformed:
      return "malformed";
    case Drop::kUnknownQp:
      return "unknown_qp";
    case Drop::kBadToken:
      return "bad_token";
    case Drop::kQpNotReady:
      return "qp_not_ready";
    case Drop::kPsnOutOfWindow:
      return "psn_out_of_window";
    case Drop::kDuplicate:
      return "duplicate";
    case Drop::kBadAck:
      return "bad_ack";
    case Drop::kTrimmed:
      return "trimmed";
    case Drop::kNoReceive:
      return "no_receive";
    case Drop::kRemoteAccess:
      return "remote_access";
    case Drop::kWimmLimit:
      return "wimm_limit";
    case Drop::kCount:
      break;
  }
  return "?";
}

}  // namespace mrc::engine
