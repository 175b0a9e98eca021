package console

import (
	"net/http"
	"strings"
)

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", page{Title: "Log in", Data: safeNext(r.URL.Query().Get("next"))})
}

// login keeps the token in an HttpOnly cookie; the API judges it on every
// call, so a wrong token shows its refusal on the next page.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if msg := checkCSRF(r); msg != "" {
		c.render(w, r, http.StatusForbidden, "login", page{Title: "Log in", Error: msg, Data: "/ui/sessions"})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	if tok == "" {
		c.render(w, r, http.StatusBadRequest, "login", page{Title: "Log in", Error: "the token is empty", Data: next})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: Prefix, HttpOnly: true, Secure: c.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if msg := checkCSRF(r); msg != "" {
		c.renderError(w, r, http.StatusForbidden, msg)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: c.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/sessions"
	}
	return next
}
