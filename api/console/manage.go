package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The actions that manage a session as a whole: send it a message, cancel
// its turn, close it, delete it. Each is refused here only for a form it
// cannot be (an empty message, an unticked confirmation); whether the
// session allows it is the API's decision, shown with its reason.

// parseManage is parseAction for the managing actions.
func (c *Console) parseManage(action string, r *http.Request) (actionFunc, error) {
	switch action {
	case "send":
		text := r.PostFormValue("text")
		if strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("the message is empty: write one")
		}
		// The form carries a key drawn when the page was rendered, so a
		// form sent twice (a double click, a retry) delivers the message
		// once.
		key := strings.TrimSpace(r.PostFormValue("key"))
		return func(ctx context.Context, id string) (done, error) {
			dup, err := c.sessions.SendMessage(ctx, id, text, key)
			if dup {
				return done{notice: "duplicate"}, err
			}
			return done{notice: "sent"}, err
		}, nil
	case "cancel":
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		return noticeOnly("cancelled", func(ctx context.Context, id string) error {
			_, err := c.svc.CancelSession(ctx, &dexv1.CancelSessionRequest{SessionId: id, By: "an operator in the console", Reason: reason})
			return err
		}), nil
	case "close":
		return func(ctx context.Context, id string) (done, error) {
			s, err := c.sessions.CloseSession(ctx, id)
			if err == nil && s.GetStatus() != dexv1.SessionStatus_SESSION_STATUS_CLOSED {
				return done{notice: "closing"}, nil
			}
			return done{notice: "closed"}, err
		}, nil
	case "delete":
		// Deleting cannot be undone: the form asks to tick a box, and
		// without JavaScript nothing else would stop a stray click.
		if r.PostFormValue("confirm") != "yes" {
			return nil, fmt.Errorf("tick “delete this session and all it holds” to delete it")
		}
		return func(ctx context.Context, id string) (done, error) {
			return done{notice: "deleted", to: "/ui/sessions?id=" + url.QueryEscape(id)}, c.sessions.DeleteSession(ctx, id)
		}, nil
	}
	return nil, fmt.Errorf("unknown action %q: approve, deny, answer, resume, reconcile, send, cancel, close or delete", action)
}
