package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
)

const csrfCookie = "dex_csrf"

// csrfToken returns the browser's CSRF token, setting a new cookie when it
// has none. Forms carry it back in a hidden field (double submit); the
// cookie is SameSite=Strict, so another site's form cannot send it.
func csrfToken(w http.ResponseWriter, r *http.Request, secure bool) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 32 {
		return ck.Value
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: Prefix, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	// The page rendered now must carry the same token.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v})
	return v
}

// checkCSRF accepts a POST only from a page of this console: the form's
// token matches the cookie, and a browser's Origin (when sent) is this host.
func checkCSRF(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return "the form was posted from another site (" + o + ")"
		}
	}
	ck, err := r.Cookie(csrfCookie)
	form := r.PostFormValue("csrf")
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(form)) != 1 {
		return "the form's CSRF token is missing or stale: reload the page and submit again"
	}
	return ""
}
