package smpp

import "fmt"

// Status is a PDU's command_status. A non-zero Status is an error in its own right, so a
// caller tests for one with errors.Is(err, smpp.StatusThrottled).
type Status uint32

// The command_status values of SMPP 3.4 (section 5.1.3), named for what they mean.
const (
	StatusOK                   Status = 0x00000000 // ESME_ROK
	StatusInvalidMsgLength     Status = 0x00000001 // ESME_RINVMSGLEN
	StatusInvalidCmdLength     Status = 0x00000002 // ESME_RINVCMDLEN
	StatusInvalidCmdID         Status = 0x00000003 // ESME_RINVCMDID
	StatusInvalidBindStatus    Status = 0x00000004 // ESME_RINVBNDSTS
	StatusAlreadyBound         Status = 0x00000005 // ESME_RALYBND
	StatusInvalidPriority      Status = 0x00000006 // ESME_RINVPRTFLG
	StatusInvalidRegDelivery   Status = 0x00000007 // ESME_RINVREGDLVFLG
	StatusSystemError          Status = 0x00000008 // ESME_RSYSERR
	StatusInvalidSourceAddr    Status = 0x0000000A // ESME_RINVSRCADR
	StatusInvalidDestAddr      Status = 0x0000000B // ESME_RINVDSTADR
	StatusInvalidMessageID     Status = 0x0000000C // ESME_RINVMSGID
	StatusBindFailed           Status = 0x0000000D // ESME_RBINDFAIL
	StatusInvalidPassword      Status = 0x0000000E // ESME_RINVPASWD
	StatusInvalidSystemID      Status = 0x0000000F // ESME_RINVSYSID
	StatusCancelFailed         Status = 0x00000011 // ESME_RCANCELFAIL
	StatusReplaceFailed        Status = 0x00000013 // ESME_RREPLACEFAIL
	StatusMessageQueueFull     Status = 0x00000014 // ESME_RMSGQFUL
	StatusInvalidServiceType   Status = 0x00000015 // ESME_RINVSERTYP
	StatusInvalidNumDests      Status = 0x00000033 // ESME_RINVNUMDESTS
	StatusInvalidDLName        Status = 0x00000034 // ESME_RINVDLNAME
	StatusInvalidDestFlag      Status = 0x00000040 // ESME_RINVDESTFLAG
	StatusInvalidSubmitReplace Status = 0x00000042 // ESME_RINVSUBREP
	StatusInvalidESMClass      Status = 0x00000043 // ESME_RINVESMCLASS
	StatusCannotSubmitToDL     Status = 0x00000044 // ESME_RCNTSUBDL
	StatusSubmitFailed         Status = 0x00000045 // ESME_RSUBMITFAIL
	StatusInvalidSourceTON     Status = 0x00000048 // ESME_RINVSRCTON
	StatusInvalidSourceNPI     Status = 0x00000049 // ESME_RINVSRCNPI
	StatusInvalidDestTON       Status = 0x00000050 // ESME_RINVDSTTON
	StatusInvalidDestNPI       Status = 0x00000051 // ESME_RINVDSTNPI
	StatusInvalidSystemType    Status = 0x00000053 // ESME_RINVSYSTYP
	StatusInvalidReplaceFlag   Status = 0x00000054 // ESME_RINVREPFLAG
	StatusInvalidNumMessages   Status = 0x00000055 // ESME_RINVNUMMSGS
	StatusThrottled            Status = 0x00000058 // ESME_RTHROTTLED
	StatusInvalidSchedule      Status = 0x00000061 // ESME_RINVSCHED
	StatusInvalidExpiry        Status = 0x00000062 // ESME_RINVEXPIRY
	StatusInvalidDefaultMsgID  Status = 0x00000063 // ESME_RINVDFTMSGID
	StatusTempAppError         Status = 0x00000064 // ESME_RX_T_APPN
	StatusPermAppError         Status = 0x00000065 // ESME_RX_P_APPN
	StatusRejectAppError       Status = 0x00000066 // ESME_RX_R_APPN
	StatusQueryFailed          Status = 0x00000067 // ESME_RQUERYFAIL
	StatusInvalidTLVStream     Status = 0x000000C0 // ESME_RINVOPTPARSTREAM
	StatusTLVNotAllowed        Status = 0x000000C1 // ESME_ROPTPARNOTALLWD
	StatusInvalidTLVLength     Status = 0x000000C2 // ESME_RINVPARLEN
	StatusMissingTLV           Status = 0x000000C3 // ESME_RMISSINGOPTPARAM
	StatusInvalidTLVValue      Status = 0x000000C4 // ESME_RINVOPTPARAMVAL
	StatusDeliveryFailure      Status = 0x000000FE // ESME_RDELIVERYFAILURE
	StatusUnknownError         Status = 0x000000FF // ESME_RUNKNOWNERR
)

var statusNames = map[Status]string{
	StatusOK: "ESME_ROK", StatusInvalidMsgLength: "ESME_RINVMSGLEN", StatusInvalidCmdLength: "ESME_RINVCMDLEN",
	StatusInvalidCmdID: "ESME_RINVCMDID", StatusInvalidBindStatus: "ESME_RINVBNDSTS", StatusAlreadyBound: "ESME_RALYBND",
	StatusInvalidPriority: "ESME_RINVPRTFLG", StatusInvalidRegDelivery: "ESME_RINVREGDLVFLG", StatusSystemError: "ESME_RSYSERR",
	StatusInvalidSourceAddr: "ESME_RINVSRCADR", StatusInvalidDestAddr: "ESME_RINVDSTADR", StatusInvalidMessageID: "ESME_RINVMSGID",
	StatusBindFailed: "ESME_RBINDFAIL", StatusInvalidPassword: "ESME_RINVPASWD", StatusInvalidSystemID: "ESME_RINVSYSID",
	StatusCancelFailed: "ESME_RCANCELFAIL", StatusReplaceFailed: "ESME_RREPLACEFAIL", StatusMessageQueueFull: "ESME_RMSGQFUL",
	StatusInvalidServiceType: "ESME_RINVSERTYP", StatusInvalidNumDests: "ESME_RINVNUMDESTS", StatusInvalidDLName: "ESME_RINVDLNAME",
	StatusInvalidDestFlag: "ESME_RINVDESTFLAG", StatusInvalidSubmitReplace: "ESME_RINVSUBREP", StatusInvalidESMClass: "ESME_RINVESMCLASS",
	StatusCannotSubmitToDL: "ESME_RCNTSUBDL", StatusSubmitFailed: "ESME_RSUBMITFAIL", StatusInvalidSourceTON: "ESME_RINVSRCTON",
	StatusInvalidSourceNPI: "ESME_RINVSRCNPI", StatusInvalidDestTON: "ESME_RINVDSTTON", StatusInvalidDestNPI: "ESME_RINVDSTNPI",
	StatusInvalidSystemType: "ESME_RINVSYSTYP", StatusInvalidReplaceFlag: "ESME_RINVREPFLAG", StatusInvalidNumMessages: "ESME_RINVNUMMSGS",
	StatusThrottled: "ESME_RTHROTTLED", StatusInvalidSchedule: "ESME_RINVSCHED", StatusInvalidExpiry: "ESME_RINVEXPIRY",
	StatusInvalidDefaultMsgID: "ESME_RINVDFTMSGID", StatusTempAppError: "ESME_RX_T_APPN", StatusPermAppError: "ESME_RX_P_APPN",
	StatusRejectAppError: "ESME_RX_R_APPN", StatusQueryFailed: "ESME_RQUERYFAIL", StatusInvalidTLVStream: "ESME_RINVOPTPARSTREAM",
	StatusTLVNotAllowed: "ESME_ROPTPARNOTALLWD", StatusInvalidTLVLength: "ESME_RINVPARLEN", StatusMissingTLV: "ESME_RMISSINGOPTPARAM",
	StatusInvalidTLVValue: "ESME_RINVOPTPARAMVAL", StatusDeliveryFailure: "ESME_RDELIVERYFAILURE", StatusUnknownError: "ESME_RUNKNOWNERR",
}

// String is the specification's name of the status ("ESME_RTHROTTLED"), or its number.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("command_status 0x%08X", uint32(s))
}

// Error makes a Status an error value of its own.
func (s Status) Error() string { return "smpp: " + s.String() }

// Transient reports whether the SMSC refused the request for now only (throttled, or its queue
// full): the same PDU may be sent again after a pause, since the SMSC said it did not take it.
func (s Status) Transient() bool {
	return s == StatusThrottled || s == StatusMessageQueueFull
}
