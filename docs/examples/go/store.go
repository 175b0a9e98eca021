package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// InvoiceStore stands in for the outside systems the tools change: an
// invoice system that takes an idempotency key (a second request with the
// same key sends nothing and answers the first invoice) and a card
// processor that takes none (every request charges). It is one JSON file,
// shared by every Worker process that names it: a Worker killed mid-call and
// its replacement see the same invoices.
type InvoiceStore struct {
	Path string
	mu   sync.Mutex // the file lock is per process; this orders goroutines
}

// Invoice is one sent invoice.
type Invoice struct {
	ID             string `json:"id"`
	OrderID        string `json:"order_id"`
	AmountCents    int64  `json:"amount_cents"`
	IdempotencyKey string `json:"idempotency_key"`
	SentAt         string `json:"sent_at"`
}

// Charge is one card charge.
type Charge struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	ChargedAt   string `json:"charged_at"`
}

// storeData is the file's content.
type storeData struct {
	// Invoices by the idempotency key they were sent with.
	Invoices map[string]Invoice `json:"invoices"`
	Charges  []Charge           `json:"charges"`
}

// defaultStorePath is the store when INVOICE_STORE is not set.
func defaultStorePath() string {
	return filepath.Join(os.TempDir(), "certify-worker-invoices.json")
}

// SendInvoice sends an invoice for the order unless one was sent with key
// already; it returns the invoice and whether it is new.
func (s *InvoiceStore) SendInvoice(key, orderID string, amountCents int64) (inv Invoice, created bool, err error) {
	if key == "" {
		return Invoice{}, false, errors.New("an invoice needs an idempotency key")
	}
	err = s.update(func(d *storeData) (bool, error) {
		if old, ok := d.Invoices[key]; ok {
			inv = old
			return false, nil
		}
		inv = Invoice{ID: fmt.Sprintf("INV-%04d", len(d.Invoices)+1), OrderID: orderID, AmountCents: amountCents,
			IdempotencyKey: key, SentAt: time.Now().UTC().Format(time.RFC3339Nano)}
		d.Invoices[key] = inv
		created = true
		return true, nil
	})
	return inv, created, err
}

// Charge charges the order's card: every call is a new charge.
func (s *InvoiceStore) Charge(orderID string, amountCents int64) (c Charge, err error) {
	err = s.update(func(d *storeData) (bool, error) {
		c = Charge{ID: fmt.Sprintf("CH-%04d", len(d.Charges)+1), OrderID: orderID, AmountCents: amountCents,
			ChargedAt: time.Now().UTC().Format(time.RFC3339Nano)}
		d.Charges = append(d.Charges, c)
		return true, nil
	})
	return c, err
}

// Read returns the store's content.
func (s *InvoiceStore) Read() (invoices map[string]Invoice, charges []Charge, err error) {
	err = s.update(func(d *storeData) (bool, error) {
		invoices, charges = d.Invoices, d.Charges
		return false, nil
	})
	return invoices, charges, err
}

// update runs f on the file's content under the file's lock and, when f
// says it changed it, replaces the file with the result: written to a temporary file,
// synced, then renamed over it, so a Worker killed mid-write leaves the old
// content or the new, never a torn file.
func (s *InvoiceStore) update(f func(*storeData) (changed bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockFile(s.Path + ".lock")
	if err != nil {
		return fmt.Errorf("invoice store: %w", err)
	}
	defer unlock()

	d := storeData{Invoices: map[string]Invoice{}, Charges: []Charge{}}
	raw, err := os.ReadFile(s.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("invoice store: %w", err)
	default:
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("invoice store %s: %w", s.Path, err)
		}
		if d.Invoices == nil {
			d.Invoices = map[string]Invoice{}
		}
		if d.Charges == nil {
			d.Charges = []Charge{}
		}
	}
	if changed, err := f(&d); err != nil || !changed {
		return err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), filepath.Base(s.Path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("invoice store: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("invoice store: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("invoice store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("invoice store: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("invoice store: %w", err)
	}
	return nil
}
