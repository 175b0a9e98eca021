package console

import (
	"net/http"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// scheduleView is a schedule as the schedules page shows it.
type scheduleView struct {
	*dexv1.Schedule
	Spec, Overlap, CatchUp, Outcome string
}

// schedulesData is the Schedules page: the list and the create form.
type schedulesData struct {
	Schedules []scheduleView
	Form      scheduleForm
	// Session is the session a trigger started ("" otherwise).
	Session string
}

// schedulesPage lists the schedules (docs/schedules.md): their spec, state,
// next and last slot, and counts, with the forms that change them
// (schedule_actions.go).
func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.showSchedules(w, r, http.StatusOK, "", q.Get("done"), scheduleForm{})
}

// showSchedules renders the page with a form's error, or the notice a
// redirect asked for, and the create form as typed.
func (c *Console) showSchedules(w http.ResponseWriter, r *http.Request, code int, errMsg, done string, f scheduleForm) {
	ctx, cancel := c.apiContext(r)
	defer cancel()
	list, err := c.sessions.ListSchedules(ctx)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	views := make([]scheduleView, 0, len(list))
	for _, s := range list {
		views = append(views, scheduleView{Schedule: s, Spec: scheduleSpec(s),
			Overlap: enumWord(s.Overlap.String(), "SCHEDULE_OVERLAP_"),
			CatchUp: enumWord(s.CatchUp.String(), "SCHEDULE_CATCH_UP_"),
			Outcome: enumWord(s.LastOutcome.String(), "SCHEDULE_SLOT_OUTCOME_"),
		})
	}
	d := schedulesData{Schedules: views, Form: f}
	if done == "triggered" {
		d.Session = r.URL.Query().Get("session")
	}
	c.render(w, r, code, "schedules", page{Title: "Schedules", Nav: "schedules", Error: errMsg, Notice: scheduleNotices[done], Data: d})
}

func scheduleSpec(s *dexv1.Schedule) string {
	if s.IntervalMs > 0 {
		return "every " + (time.Duration(s.IntervalMs) * time.Millisecond).String()
	}
	zone := s.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	return s.Cron + " (" + zone + ")"
}

// enumWord is an enum value's name without its prefix, in lower case
// ("queue_one").
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}
