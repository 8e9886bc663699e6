// Package upload serves the two Connect routes whose bodies are not JSON: the CSV upload
// (multipart field "file", or a text/csv body, up to 50 MiB, streamed to Connect in chunks and
// never held whole in memory) and the sample file download.
package upload

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	"github.com/mnvhq/mnv/services/platform/apijson"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// The rules of the two RPCs, which declare their routes, the upload's status and its message
// (mnv.options.v1.rule gateway_route).
var (
	importRule = mustRule(connectv1.ConnectService_UploadImport_FullMethodName)
	sampleRule = mustRule(connectv1.ConnectService_GetImportSample_FullMethodName)
)

// Routes of the non-JSON Connect endpoints.
var (
	ImportPath = importRule.GetGatewayRoute().GetPath()
	SamplePath = sampleRule.GetGatewayRoute().GetPath()
)

func mustRule(method string) *optionsv1.Rule {
	r, ok := rpcrule.Lookup(method)
	if !ok || r.GetGatewayRoute() == nil {
		panic("upload: " + method + " declares no gateway_route")
	}
	return r
}

// MaxFile is the largest file accepted; multipart framing may add a little on top.
const MaxFile = 50 << 20

const chunk = 256 << 10

// Register adds the routes to mux.
func Register(mux *runtime.ServeMux, connect connectv1.ConnectServiceClient) error {
	if err := mux.HandlePath(importRule.GetGatewayRoute().GetMethod(), ImportPath, importHandler(mux, connect)); err != nil {
		return err
	}
	return mux.HandlePath(sampleRule.GetGatewayRoute().GetMethod(), SamplePath, sampleHandler(mux, connect))
}

// Streaming reports whether a request is the upload, which the JSON body limit must leave alone.
func Streaming(r *http.Request) bool {
	return r.Method == importRule.GetGatewayRoute().GetMethod() && r.URL.Path == ImportPath
}

func annotate(mux *runtime.ServeMux, r *http.Request, method, pattern string) (context.Context, error) {
	return runtime.AnnotateContext(r.Context(), mux, r, method, runtime.WithHTTPPathPattern(pattern))
}

var (
	errTooLarge = envelope.Error{Status: http.StatusRequestEntityTooLarge, Code: string(fault.PayloadTooLarge),
		Message: "the file is larger than 50 MiB"}
	errNoFile = envelope.Error{Status: http.StatusBadRequest, Code: string(fault.InvalidArgument), Field: "file",
		Message: "send the CSV as the multipart field \"file\" or as a text/csv body"}
)

func importHandler(mux *runtime.ServeMux, connect connectv1.ConnectServiceClient) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		if r.ContentLength > MaxFile+64<<10 {
			envelope.WriteError(w, errTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxFile+64<<10)
		body, name, ok := file(r)
		if !ok {
			envelope.WriteError(w, errNoFile)
			return
		}
		ctx, err := annotate(mux, r, connectv1.ConnectService_UploadImport_FullMethodName, ImportPath)
		if err != nil {
			envelope.WriteError(w, envelope.FromErr(r.Context(), err))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := connect.UploadImport(ctx)
		if err != nil {
			envelope.WriteError(w, envelope.FromErr(r.Context(), err))
			return
		}
		if err := stream.Send(&connectv1.UploadImportRequest{Part: &connectv1.UploadImportRequest_Header{
			Header: &connectv1.UploadImportHeader{FileName: name}}}); err != nil {
			writeStreamError(w, r, stream, recvErr(stream, err))
			return
		}
		buf := make([]byte, chunk)
		var size int64
		for {
			n, rerr := io.ReadFull(body, buf)
			if n > 0 {
				if size += int64(n); size > MaxFile {
					envelope.WriteError(w, errTooLarge)
					return
				}
				if err := stream.Send(&connectv1.UploadImportRequest{Part: &connectv1.UploadImportRequest_Chunk{Chunk: buf[:n]}}); err != nil {
					writeStreamError(w, r, stream, recvErr(stream, err))
					return
				}
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				break
			}
			var tooLarge *http.MaxBytesError
			if errors.As(rerr, &tooLarge) {
				envelope.WriteError(w, errTooLarge)
				return
			}
			if rerr != nil {
				envelope.WriteError(w, envelope.Error{Status: http.StatusBadRequest, Code: string(fault.InvalidArgument),
					Message: "the upload could not be read"})
				return
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			writeStreamError(w, r, stream, err)
			return
		}
		envelope.WriteSuccess(w, rpcrule.SuccessStatus(importRule), importRule.GetSuccessMessage(),
			apijson.AppendMessage(nil, resp.GetJob().ProtoReflect()))
	}
}

// writeStreamError answers the error that ended the upload stream, with the Retry-After that
// connect set on a refusal (the mux passes it on for the other routes).
func writeStreamError(w http.ResponseWriter, r *http.Request, stream connectv1.ConnectService_UploadImportClient, err error) {
	if md, herr := stream.Header(); herr == nil {
		for _, v := range md.Get(ratelimit.RetryAfterMD) {
			w.Header().Add("Retry-After", v)
		}
	}
	envelope.WriteError(w, envelope.FromErr(r.Context(), err))
}

// recvErr returns the service's own error when a Send failed because the stream ended.
func recvErr(stream connectv1.ConnectService_UploadImportClient, err error) error {
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.CloseAndRecv(); rerr != nil {
			return rerr
		}
	}
	return err
}

// file finds the uploaded file: the multipart field "file", or the whole body when it is CSV.
func file(r *http.Request) (io.Reader, string, bool) {
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case ct == "multipart/form-data" && params["boundary"] != "":
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, "", false
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				return nil, "", false
			}
			if part.FormName() == "file" {
				return part, part.FileName(), true
			}
		}
	case ct == "text/csv" || ct == "application/csv":
		name := ""
		if _, p, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err == nil {
			name = p["filename"]
		}
		return r.Body, name, true
	}
	return nil, "", false
}

func sampleHandler(mux *runtime.ServeMux, connect connectv1.ConnectServiceClient) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		ctx, err := annotate(mux, r, connectv1.ConnectService_GetImportSample_FullMethodName, SamplePath)
		if err != nil {
			envelope.WriteError(w, envelope.FromErr(r.Context(), err))
			return
		}
		resp, err := connect.GetImportSample(ctx, &connectv1.GetImportSampleRequest{})
		if err != nil {
			envelope.WriteError(w, envelope.FromErr(r.Context(), err))
			return
		}
		name := strings.Map(func(c rune) rune {
			if c == '"' || c == '\\' || c < 0x20 {
				return '_'
			}
			return c
		}, resp.GetFileName())
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		_, _ = w.Write(resp.GetContent())
	}
}
