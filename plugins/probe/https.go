package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// httpsGet GETs url without following redirects and closes the body. Any
// answer below 500 is a success: the endpoint is reachable and serving (an
// object store answers an anonymous GET with 403); a 5xx is the endpoint
// failing.
func httpsGet(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return notPermitted(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// newProbeClient is the HTTPS client of the probes: no connection reuse
// (each probe measures a whole connection, as a client starting up would
// see it), no redirects.
func newProbeClient(rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}
	}
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
