package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/contract"
)

// maxDocument bounds the OpenAPI document import reads.
const maxDocument = 16 << 20

// cmdDestinationImport writes a destination block for the configuration
// file from the destination's OpenAPI document (contract.Import).
func cmdDestinationImport(ctx context.Context, args []string, std stdio) error {
	stdout, stderr := std.out, std.err
	fs := newFlagSet("destination import", std)
	src := fs.String("openapi", "", "the destination's OpenAPI 3.0 or 3.1 document: a file, or an http(s) URL")
	o := contract.Options{Probes: map[string]string{}, Actions: map[string]string{}}
	fs.StringVar(&o.Name, "name", "", "the destination's name in the configuration")
	fs.StringVar(&o.Base, "base", "", "the destination's address (default: the document's first server)")
	for _, kind := range contract.ProbeKinds {
		fs.Func(kind, "`operationId` of the "+kind+" probe (default: the operation marked x-limbo-probe: "+kind+")", func(v string) error {
			o.Probes[kind] = v
			return nil
		})
	}
	fs.Func("action", "`ACTION=operationId`: the action's payload is sent as that operation; its request schema is kept (repeatable)", func(v string) error {
		a, id, ok := strings.Cut(v, "=")
		if !ok || a == "" || id == "" {
			return errors.New("write --action ACTION=operationId")
		}
		o.Actions[a] = id
		return nil
	})
	fs.StringVar(&o.Body, "body", "", "where, in an action's payload, the request body is (\"body\" for {\"method\",\"path\",\"body\"}; default the payload itself)")
	fs.StringVar(&o.AuthHeader, "auth-header", "Authorization", "the header the probes' credential is sent in")
	fs.StringVar(&o.AuthEnv, "auth-env", "", "the environment variable holding the probes' read-only credential")
	fs.StringVar(&o.WriteAuthEnv, "write-auth-env", "", "the environment variable holding the integration's write credential, so Limbo can warn when a probe shares it")
	fs.BoolVar(&o.AllowPostSearch, "allow-post-search", false, "accept a search operation that is a POST (a probe is otherwise a GET)")
	fs.BoolVar(&o.AllowInternal, "allow-internal", false, "let the probes reach the destination's host when it is a loopback or private address")
	out := fs.String("out", "", "write the block to this new file (default: standard output); an existing file is refused unless --force: it may be a whole configuration file")
	force := fs.Bool("force", false, "with --out, replace the file if it exists")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if *src == "" || o.Name == "" {
		return errors.New("destination import: --openapi FILE_OR_URL and --name NAME are required")
	}
	data, err := readDocument(ctx, *src)
	if err != nil {
		return err
	}
	o.Source = *src
	block, err := contract.Import(ctx, data, o)
	if err != nil {
		return fmt.Errorf("destination import: %w", err)
	}
	if *out == "" {
		_, err = stdout.Write(block)
		return err
	}
	if err := writeOut(*out, block, *force); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "limbo: wrote destination %q to %s\n", o.Name, *out)
	return nil
}

// writeOut writes data to a new file at path, refusing an existing one
// unless force: the block is one destination, and the file it would replace
// may be a whole configuration.
func writeOut(path string, data []byte, force bool) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("destination import: %s already exists; add the block to it by hand, write it elsewhere, or pass --force to replace the file", path)
	} else if err != nil {
		return fmt.Errorf("destination import: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("destination import: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("destination import: %w", err)
	}
	return nil
}

// readDocument reads a file, or fetches an http(s) URL (the operator's
// own, so not through netguard: importing the document of an internal
// service is the point).
func readDocument(ctx context.Context, src string) ([]byte, error) {
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readBounded(f, src)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", src, resp.StatusCode)
	}
	return readBounded(resp.Body, src)
}

func readBounded(r io.Reader, src string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDocument {
		return nil, fmt.Errorf("%s is larger than %d MiB", src, maxDocument>>20)
	}
	return data, nil
}
