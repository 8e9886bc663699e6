package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/grpc/metadata"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
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

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2 * cfg.Workers
	tr.MaxIdleConnsPerHost = cfg.Workers
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

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

// restGetClient is GET /v1/api/clients with the client's API key; only a 200 is a success. The
// body is read to the end so the connection goes back to the pool.
func restGetClient(hc *http.Client, gatewayURL string, c harness.Client) Op {
	url := gatewayURL + "/v1/api/clients"
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-API-KEY", c.APIKey)
		req.Header.Set("X-CLIENT-ID", c.ID)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
		}
		if !json.Valid(body) {
			return fmt.Errorf("HTTP 200 with a body that is not JSON: %.200s", body)
		}
		return nil
	}
}

// grpcGetClient is AccountsService.GetClient with the client's API key in the metadata, as the
// gateway forwards it; only OK is a success.
func grpcGetClient(cl accountsv1.AccountsServiceClient, c harness.Client) Op {
	md := metadata.Pairs(auth.MDAPIKey, c.APIKey, auth.MDClientID, c.ID)
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
