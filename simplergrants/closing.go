package simplergrants

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"time"
)

// The API reads a competition's dates in US Eastern time: a competition
// is open until the date there is past its closing_date plus its
// grace_period in days (HHS/simpler-grants-gov@32d9a126f
// api/src/db/models/competition_models.py:104-136, has_open_date, by
// get_now_us_eastern_date of grants-shared 0.3.1, api/pyproject.toml:49).
var eastern = sync.OnceValues(func() (*time.Location, error) {
	return time.LoadLocation("America/New_York")
})

var reOnlyUUID = regexp.MustCompile(`^` + reUUID + `$`)

// ClosingTime is the time a competition closes by its closing date, as
// the API gives it (closing_date, "2006-01-02"): the end of that day in
// US Eastern time, the first instant of the next day in America/New_York.
// It is meant for [grantretry.WithClosingTime]:
//
//	closes, err := simplergrants.ClosingTime("2027-03-15")
//	ctx = grantretry.WithClosingTime(ctx, closes)
//
// The API goes on taking applications for the competition's grace
// period, whole days after that one; the period is in no answer of the
// API, and ClosingTime leaves it out: it is the deadline as published,
// which a pipeline means to meet. An owed call still owed after it is
// late ([grantretry.Outcome.Late]) though the API may take it in the
// grace days.
//
// It fails on a date that is not one, and when the time zone database
// has no America/New_York: a program can embed one with
// import _ "time/tzdata".
func ClosingTime(closingDate string) (time.Time, error) {
	loc, err := eastern()
	if err != nil {
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: US Eastern time: %w", err)
	}
	d, err := time.ParseInLocation(time.DateOnly, closingDate, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: closing date %q is not a date (2006-01-02)", closingDate)
	}
	return d.AddDate(0, 0, 1), nil
}

// CompetitionClosing reads the competition's record (GET
// /alpha/competitions/{competition_id}, which a user's API key or session
// may read) through the Reconciler's client, and returns the
// [ClosingTime] of its closing_date, or the zero time when its
// closing_date is null: then the competition has no closing date, and
// [grantretry.WithClosingTime] given the zero time sets none. A pipeline
// reads it once per competition, before its calls:
//
//	closes, err := rec.CompetitionClosing(ctx, competitionID)
//	if err != nil {
//		return err // no answer: the pipeline decides whether to go on without a closing time
//	}
//	ctx = grantretry.WithClosingTime(ctx, closes)
//
// It fails, saying why, on an id that is not a UUID, on any answer but a
// 200 whose data carries the competition (a 404 for a competition the API
// does not know, maintenance, the gateway's throttle or quota), and on a
// closing_date that is not a date. The answer's is_open is not read: the
// API counts the grace period in it, which ClosingTime leaves out.
func (r *Reconciler) CompetitionClosing(ctx context.Context, competitionID string) (time.Time, error) {
	if r == nil {
		return time.Time{}, errNilReconciler
	}
	if r.err != nil {
		return time.Time{}, r.err
	}
	if !reOnlyUUID.MatchString(competitionID) {
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: competition id %q is not a UUID", competitionID)
	}
	u := *r.base
	u.Path += "/alpha/competitions/" + competitionID
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: reading competition %s: %w", competitionID, err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: reading competition %s: %w", competitionID, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxQueryBytes+1))
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: reading competition %s: %w", competitionID, err)
	case len(raw) > maxQueryBytes:
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: reading competition %s: the answer is over %d bytes", competitionID, maxQueryBytes)
	case resp.StatusCode != http.StatusOK:
		why := ""
		if c, ok := ClassifyFault(resp, raw); ok {
			why = " (" + c.Reason + ")"
		}
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: reading competition %s: the API answered %d%s", competitionID, resp.StatusCode, why)
	}
	// CompetitionResponseAlphaSchema, data a CompetitionAlphaSchema
	// (api/openapi.generated.yml:11109-11123, 7293-7375): closing_date is
	// a date or null.
	var got struct {
		Data *struct {
			CompetitionID string  `json:"competition_id"`
			ClosingDate   *string `json:"closing_date"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &got) != nil || got.Data == nil || got.Data.CompetitionID == "" {
		return time.Time{}, fmt.Errorf("grantretry: simplergrants: reading competition %s: the answer does not read as a competition", competitionID)
	}
	if got.Data.ClosingDate == nil {
		return time.Time{}, nil
	}
	return ClosingTime(*got.Data.ClosingDate)
}
