package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parleyim/parley/internal/auth"
)

// pushCmd: parley push test --user U | parley push vapid-keys.
func pushCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("push: usage: parley push test --user USER [--server URL] [--api-key KEY | --data DIR]\n       parley push vapid-keys")
	}
	switch args[0] {
	case "test":
		return pushTest(args[1:])
	case "vapid-keys":
		pub, priv := auth.NewVAPIDKeys()
		fmt.Printf("webpush_vapid_public_key: %s\nwebpush_vapid_private_key: %s\n", pub, priv)
		return nil
	}
	return fmt.Errorf("push: unknown subcommand %q (test, vapid-keys)", args[0])
}

// pushTest asks the server to send a test notification to each of a user's
// devices and prints each platform's answer.
func pushTest(args []string) error {
	fs := flag.NewFlagSet("push test", flag.ContinueOnError)
	user := fs.String("user", "", "the user whose devices get a test notification (required)")
	server := fs.String("server", "http://127.0.0.1:8080", "the server's HTTP address")
	apiKey := fs.String("api-key", os.Getenv("PARLEY_API_KEY"), "admin API key (or $PARLEY_API_KEY, or --data)")
	dataDir := fs.String("data", "", "the server's data directory: read the API key from DIR/secrets.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return errors.New("push test: --user is required")
	}
	key := *apiKey
	if key == "" && *dataDir != "" {
		var err error
		if key, err = apiKeyFrom(*dataDir); err != nil {
			return err
		}
	}
	if key == "" {
		return errors.New("push test: no admin API key (--api-key, $PARLEY_API_KEY or --data DIR)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := strings.TrimRight(*server, "/") + "/v1/admin/users/" + url.PathEscape(*user) + "/push/test"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fmt.Errorf("push test: %w", err)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("push test: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("push test: server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var out struct {
		Devices []struct {
			DeviceID string        `json:"device_id"`
			Kind     string        `json:"kind"`
			Outcome  string        `json:"outcome"`
			Status   int           `json:"status"`
			Reason   string        `json:"reason"`
			Error    string        `json:"error"`
			Latency  time.Duration `json:"latency_ns"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("push test: unexpected answer: %w", err)
	}
	if len(out.Devices) == 0 {
		fmt.Printf("%s has no device registered for push notifications\n", *user)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tPLATFORM\tOUTCOME\tSTATUS\tLATENCY\tREASON")
	failed := 0
	for _, d := range out.Devices {
		reason := d.Reason
		if d.Error != "" && reason == "" {
			reason = d.Error
		}
		if d.Outcome != "sent" {
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.DeviceID, d.Kind, d.Outcome, d.Status, d.Latency.Round(time.Millisecond), reason)
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("push test: %d of %d devices not reached", failed, len(out.Devices))
	}
	return nil
}
