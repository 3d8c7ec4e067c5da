package s3

import (
	"encoding/xml"
	"fmt"
	"net/http"
)

// Error is an S3 error: a code S3 clients know, its HTTP status, and a
// message; it is answered as S3's XML error document.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// S3 error codes this gateway answers, with their HTTP statuses.
var (
	ErrAccessDenied                      = &Error{Code: "AccessDenied", Status: http.StatusForbidden}
	ErrAuthorizationHeaderMalformed      = &Error{Code: "AuthorizationHeaderMalformed", Status: http.StatusBadRequest}
	ErrSignatureDoesNotMatch             = &Error{Code: "SignatureDoesNotMatch", Status: http.StatusForbidden}
	ErrInvalidAccessKeyID                = &Error{Code: "InvalidAccessKeyId", Status: http.StatusForbidden}
	ErrRequestTimeTooSkewed              = &Error{Code: "RequestTimeTooSkewed", Status: http.StatusForbidden}
	ErrNoSuchBucket                      = &Error{Code: "NoSuchBucket", Status: http.StatusNotFound}
	ErrNoSuchKey                         = &Error{Code: "NoSuchKey", Status: http.StatusNotFound}
	ErrBucketNotEmpty                    = &Error{Code: "BucketNotEmpty", Status: http.StatusConflict}
	ErrBucketAlreadyOwnedByYou           = &Error{Code: "BucketAlreadyOwnedByYou", Status: http.StatusConflict}
	ErrInvalidBucketName                 = &Error{Code: "InvalidBucketName", Status: http.StatusBadRequest}
	ErrInvalidArgument                   = &Error{Code: "InvalidArgument", Status: http.StatusBadRequest}
	ErrInvalidRange                      = &Error{Code: "InvalidRange", Status: http.StatusRequestedRangeNotSatisfiable}
	ErrEntityTooLarge                    = &Error{Code: "EntityTooLarge", Status: http.StatusBadRequest}
	ErrMissingContentLength              = &Error{Code: "MissingContentLength", Status: http.StatusLengthRequired}
	ErrXAmzContentSHA256Mismatch         = &Error{Code: "XAmzContentSHA256Mismatch", Status: http.StatusBadRequest}
	ErrBadDigest                         = &Error{Code: "BadDigest", Status: http.StatusBadRequest}
	ErrKeyTooLong                        = &Error{Code: "KeyTooLongError", Status: http.StatusBadRequest}
	ErrAuthorizationQueryParametersError = &Error{Code: "AuthorizationQueryParametersError", Status: http.StatusBadRequest}
	ErrNoSuchUpload                      = &Error{Code: "NoSuchUpload", Status: http.StatusNotFound}
	ErrInvalidPart                       = &Error{Code: "InvalidPart", Status: http.StatusBadRequest}
	ErrInvalidPartOrder                  = &Error{Code: "InvalidPartOrder", Status: http.StatusBadRequest}
	ErrEntityTooSmall                    = &Error{Code: "EntityTooSmall", Status: http.StatusBadRequest}
	ErrMalformedXML                      = &Error{Code: "MalformedXML", Status: http.StatusBadRequest}
	ErrMetadataTooLarge                  = &Error{Code: "MetadataTooLarge", Status: http.StatusBadRequest}
	ErrInvalidRequest                    = &Error{Code: "InvalidRequest", Status: http.StatusBadRequest}
	ErrInvalidDigest                     = &Error{Code: "InvalidDigest", Status: http.StatusBadRequest}
	ErrIncompleteBody                    = &Error{Code: "IncompleteBody", Status: http.StatusBadRequest}
	ErrNotImplemented                    = &Error{Code: "NotImplemented", Status: http.StatusNotImplemented}
	ErrMethodNotAllowed                  = &Error{Code: "MethodNotAllowed", Status: http.StatusMethodNotAllowed}
	ErrInternal                          = &Error{Code: "InternalError", Status: http.StatusInternalServerError}
	ErrServiceUnavailable                = &Error{Code: "ServiceUnavailable", Status: http.StatusServiceUnavailable}
)

// errorf returns kind with a message.
func errorf(kind *Error, format string, args ...any) *Error {
	return &Error{Code: kind.Code, Status: kind.Status, Message: fmt.Sprintf(format, args...)}
}

// errorDocument is S3's XML error body.
type errorDocument struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource"`
	RequestID string   `xml:"RequestId"`
}

// writeError answers e; HEAD answers carry no body, as S3's do.
func writeError(w http.ResponseWriter, r *http.Request, e *Error, requestID string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", requestID)
	w.WriteHeader(e.Status)
	if r.Method == http.MethodHead {
		return
	}
	body, err := xml.Marshal(errorDocument{Code: e.Code, Message: e.Message, Resource: r.URL.Path, RequestID: requestID})
	if err != nil {
		return
	}
	_, _ = w.Write(append([]byte(xml.Header), body...))
}
