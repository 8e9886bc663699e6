package csvimport

// SampleFileName is the download file name of the sample file.
const SampleFileName = "mnv-connect-sample.csv"

// sample has the five documented columns (docs/api-decisions.md#imports) and five valid rows (RFC
// 4180: CRLF line ends).
const sample = "mobileNumber,externalId,firstName,lastName,email\r\n" +
	"+971501234567,CUST-1001,Aisha,Al Mansoori,aisha.almansoori@example.com\r\n" +
	"+971552345678,CUST-1002,Omar,Haddad,omar.haddad@example.com\r\n" +
	"+447400123456,CUST-1003,Olivia,Bennett,olivia.bennett@example.com\r\n" +
	"+447400987654,CUST-1004,James,Walker,james.walker@example.com\r\n" +
	"+971563456789,CUST-1005,Fatima,Khan,fatima.khan@example.com\r\n"

// Sample returns the sample file served at GET /v1/api/me/connect/import/sample.csv (as
// text/csv, with SampleFileName as the download name): the header
// mobileNumber,externalId,firstName,lastName,email and five valid rows. Each call returns a new
// slice.
func Sample() []byte { return []byte(sample) }
