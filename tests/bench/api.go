package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/tests/harness"
)

// benchAPI is benchmark A: the same read of a client's own details, once through the gateway
// (REST/JSON over HTTP/1.1, then gRPC to accounts) and once straight to accounts over gRPC.
// The difference is what the gateway costs.
func benchAPI(ctx context.Context, s *harness.Suite, cfg Config, grpcConns int, progress io.Writer) (rest, grpcM Measured, err error) {
	c, err := s.CreateClient(ctx, 1000)
	if err != nil {
		return rest, grpcM, err
	}

	hc, closeHTTP := newHTTPClient(cfg.Workers)
	defer closeHTTP()

	pool, err := dialPool(s.AccountsAddr, grpcConns)
	if err != nil {
		return rest, grpcM, err
	}
	defer pool.Close()

	ms, err := Compare(ctx, cfg, progress,
		Variant{Name: "A REST GET /v1/api/clients", Op: restGetClient(hc, s.GatewayURL, c)},
		Variant{Name: "A gRPC AccountsService.GetClient", Op: grpcGetClient(accountsv1.NewAccountsServiceClient(pool), c)},
	)
	if err != nil {
		return rest, grpcM, err
	}
	return ms[0], ms[1], nil
}

// newHTTPClient is an HTTP/1.1 client that keeps up to conns idle connections to the gateway,
// so a load of conns workers reuses its connections; closeIdle closes them.
func newHTTPClient(conns int) (hc *http.Client, closeIdle func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2 * conns
	tr.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

// restCall sends one REST request with the header pairs (name, value, ...) and, unless body is
// empty, a JSON body, and returns the answer's body. Anything but a 200 with a JSON body is an
// error.
func restCall(ctx context.Context, hc *http.Client, method, url, body string, header ...string) ([]byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return doJSON(hc, req, http.StatusOK)
}

// doJSON sends req and reads the answer to the end, so the connection goes back to the pool,
// and returns it. Anything but the status want with a JSON body is an error.
func doJSON(hc *http.Client, req *http.Request, want int) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return b, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	if !json.Valid(b) {
		return b, fmt.Errorf("HTTP %d with a body that is not JSON: %.200s", want, b)
	}
	return b, nil
}

// decodeData decodes the data of a JSON envelope ({"data": ...}) into v.
func decodeData(raw []byte, v any) error {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || len(env.Data) == 0 {
		return fmt.Errorf("no data in %.200s", raw)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("data %.200s: %w", env.Data, err)
	}
	return nil
}

// restGetClient is GET /v1/api/clients with the client's API key; only a 200 is a success.
func restGetClient(hc *http.Client, gatewayURL string, c harness.Client) Op {
	url := gatewayURL + "/v1/api/clients"
	return func(ctx context.Context) error {
		_, err := restCall(ctx, hc, http.MethodGet, url, "", "X-API-KEY", c.APIKey, "X-CLIENT-ID", c.ID)
		return err
	}
}

// grpcGetClient is AccountsService.GetClient with the client's API key in the metadata, as the
// gateway forwards it; only OK is a success.
func grpcGetClient(cl accountsv1.AccountsServiceClient, c harness.Client) Op {
	md := metadata.Pairs(principal.APIKey.MD(), c.APIKey, principal.MDClientID, c.ID)
	return func(ctx context.Context) error {
		resp, err := cl.GetClient(metadata.NewOutgoingContext(ctx, md), &accountsv1.GetClientRequest{})
		if err != nil {
			return err
		}
		if resp.GetClient().GetId() != c.ID {
			return fmt.Errorf("GetClient answered client %q, want %q", resp.GetClient().GetId(), c.ID)
		}
		return nil
	}
}
