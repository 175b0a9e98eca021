package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// The Schedules page's forms: create a schedule, and pause, resume,
// trigger or delete one. A form that cannot be a request is refused here;
// the spec itself (the cron expression, the zone, the interval's least
// length) is the API's to judge, and its reason is shown.

// scheduleForm is the create form as typed, kept when it is refused.
type scheduleForm struct {
	ID, Cron, Zone, Every, Agent, Message, Labels, Overlap, CatchUp string
	Paused                                                          bool
}

var overlapPolicies = map[string]dexv1.ScheduleOverlap{
	"skip": dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_SKIP, "queue_one": dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE,
	"allow": dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW,
}

var catchUpPolicies = map[string]dexv1.ScheduleCatchUp{
	"skip": dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP, "latest": dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_LATEST,
	"all": dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_ALL,
}

var scheduleNotices = map[string]string{
	"created": "Schedule created.", "paused": "Paused: no slot starts until it is resumed.",
	"resumed": "Resumed at the first slot after now.", "deleted": "Deleted: the sessions it started stay.",
	"triggered": "Triggered: one session started now, outside the slots.",
}

// createSchedule creates the form's schedule and shows the list.
func (c *Console) createSchedule(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.showSchedules(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error(), "", scheduleForm{})
		return
	}
	f := scheduleForm{
		ID: strings.TrimSpace(r.PostFormValue("id")), Cron: strings.TrimSpace(r.PostFormValue("cron")),
		Zone: strings.TrimSpace(r.PostFormValue("zone")), Every: strings.TrimSpace(r.PostFormValue("every")),
		Agent: strings.TrimSpace(r.PostFormValue("agent")), Message: r.PostFormValue("message"), Labels: r.PostFormValue("labels"),
		Overlap: r.PostFormValue("overlap"), CatchUp: r.PostFormValue("catchup"), Paused: r.PostFormValue("paused") == "yes",
	}
	if msg := checkCSRF(r); msg != "" {
		c.showSchedules(w, r, http.StatusForbidden, msg, "", f)
		return
	}
	req, err := f.request()
	if err != nil {
		c.showSchedules(w, r, http.StatusBadRequest, err.Error(), "", f)
		return
	}
	ctx, cancel := c.apiContext(r)
	defer cancel()
	if _, err := c.sessions.CreateSchedule(ctx, req); err != nil {
		c.showSchedules(w, r, httpCode(err), c.apiMessage(r, err), "", f)
		return
	}
	http.Redirect(w, r, "/ui/schedules?done=created#schedule-"+url.PathEscape(f.ID), http.StatusSeeOther)
}

// request checks the form and makes its CreateSchedule.
func (f scheduleForm) request() (*dexv1.CreateScheduleRequest, error) {
	if err := wirerules.CheckID("schedule id", f.ID); err != nil {
		return nil, err
	}
	req := &dexv1.CreateScheduleRequest{ScheduleId: f.ID, Agent: f.Agent, Message: f.Message, Paused: f.Paused}
	switch {
	case f.Cron != "" && f.Every != "":
		return nil, fmt.Errorf("give a cron expression or an interval, not both")
	case f.Cron != "":
		req.Cron, req.TimeZone = f.Cron, f.Zone
	case f.Every != "":
		if f.Zone != "" {
			return nil, fmt.Errorf("a time zone is for a cron expression: an interval's slots are the creation time plus whole intervals")
		}
		d, err := time.ParseDuration(f.Every)
		if err != nil {
			return nil, fmt.Errorf("interval %q: write a duration such as 30s, 5m or 1h", f.Every)
		}
		if d <= 0 {
			return nil, fmt.Errorf("interval %s: it must be longer than 0", f.Every)
		}
		req.IntervalMs = d.Milliseconds()
	default:
		return nil, fmt.Errorf("give a cron expression (with its time zone) or an interval")
	}
	if f.Agent != "" {
		if err := wirerules.CheckAgent(f.Agent); err != nil {
			return nil, err
		}
	}
	labels, err := parseLabels(f.Labels)
	if err != nil {
		return nil, err
	}
	req.Labels = labels
	var ok bool
	if req.Overlap, ok = overlapPolicies[orSkip(f.Overlap)]; !ok {
		return nil, fmt.Errorf("overlap policy %q: use skip, queue_one or allow", f.Overlap)
	}
	if req.CatchUp, ok = catchUpPolicies[orSkip(f.CatchUp)]; !ok {
		return nil, fmt.Errorf("catch-up policy %q: use skip, latest or all", f.CatchUp)
	}
	return req, nil
}

func orSkip(s string) string {
	if s == "" {
		return "skip"
	}
	return s
}

// scheduleAction pauses, resumes, triggers or deletes a schedule.
func (c *Console) scheduleAction(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.showSchedules(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error(), "", scheduleForm{})
		return
	}
	if msg := checkCSRF(r); msg != "" {
		c.showSchedules(w, r, http.StatusForbidden, msg, "", scheduleForm{})
		return
	}
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx, cancel := c.apiContext(r)
	defer cancel()
	to := "/ui/schedules?done="
	var err error
	switch action {
	case "pause":
		_, err = c.sessions.PauseSchedule(ctx, id)
		to += "paused"
	case "resume":
		_, err = c.sessions.ResumeSchedule(ctx, id)
		to += "resumed"
	case "trigger":
		var sid string
		sid, err = c.sessions.TriggerSchedule(ctx, id)
		to += "triggered&session=" + url.QueryEscape(sid)
	case "delete":
		// Deleting cannot be undone: the form asks to tick a box.
		if r.PostFormValue("confirm") != "yes" {
			c.showSchedules(w, r, http.StatusBadRequest, "tick “delete schedule "+id+"” to delete it", "", scheduleForm{})
			return
		}
		err = c.sessions.DeleteSchedule(ctx, id)
		to += "deleted"
	default:
		c.showSchedules(w, r, http.StatusBadRequest, fmt.Sprintf("unknown schedule action %q: pause, resume, trigger or delete", action), "", scheduleForm{})
		return
	}
	if err != nil {
		c.showSchedules(w, r, httpCode(err), c.apiMessage(r, err), "", scheduleForm{})
		return
	}
	if action != "delete" {
		to += "#schedule-" + url.PathEscape(id)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
