//! HTML of the pages, from the view models. Every page is complete without JavaScript; `app.js`
//! only refreshes the `#live` part by fetching the same URL with `X-Courier-Fragment: live`, which
//! answers [`clusters_live`], [`jobs_live`] or [`job_live`] alone. Everything that comes from a
//! cluster or a user goes through [`esc`].

use std::fmt::Write as _;

use courier_core::phase::{ALL_PHASES, JobPhase};

#[cfg(test)]
use super::model::ClusterRow;
use super::model::{ClustersView, ConditionRow, JobFilter, JobView, JobsView, url_encode};

/// Escapes text for HTML content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Which top-level page is shown (marked in the navigation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Clusters,
    Jobs,
    None,
}

/// The frame around every page.
pub struct Chrome<'a> {
    pub title: &'a str,
    pub nav: Nav,
    /// The signed-in user (shown with a sign-out button), when access is reviewed.
    pub user: Option<&'a str>,
}

pub fn page(c: &Chrome<'_>, main: &str) -> String {
    let link = |href: &str, label: &str, this: Nav| {
        let current = if c.nav == this {
            " aria-current=\"page\""
        } else {
            ""
        };
        format!("<a href=\"{href}\"{current}>{label}</a>")
    };
    let user = match c.user {
        Some(u) => format!(
            "<form class=\"who\" method=\"post\" action=\"/logout\"><span>{}</span> \
             <button type=\"submit\">Sign out</button></form>",
            esc(u)
        ),
        None => String::new(),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Courier</title>\
         <link rel=\"stylesheet\" href=\"/assets/app.css\">\
         <script src=\"/assets/app.js\" defer></script></head>\n<body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header class=\"top\"><span class=\"brand\" aria-hidden=\"true\">Courier</span>\
         <nav aria-label=\"Main\">{clusters}{jobs}</nav>\
         <span id=\"live-status\" role=\"status\" aria-live=\"polite\"></span>{user}</header>\n\
         <main id=\"main\" tabindex=\"-1\">{main}</main>\n</body></html>\n",
        title = esc(c.title),
        clusters = link("/clusters", "Clusters", Nav::Clusters),
        jobs = link("/jobs", "Jobs", Nav::Jobs),
    )
}

/// A page with just a heading and a message (errors, sign-in required).
pub fn message_page(c: &Chrome<'_>, heading: &str, message_html: &str) -> String {
    page(
        c,
        &format!(
            "<h1>{}</h1><p class=\"notice\">{message_html}</p>",
            esc(heading)
        ),
    )
}

/// The sign-in form (only when access is reviewed).
pub fn login_page(problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p class=\"notice warn\" role=\"alert\">{}</p>", esc(p)))
        .unwrap_or_default();
    page(
        &Chrome {
            title: "Sign in",
            nav: Nav::None,
            user: None,
        },
        &format!(
            "<h1>Sign in</h1>{problem}<form class=\"login\" method=\"post\" action=\"/login\">\
             <label for=\"token\">Kubernetes bearer token of the management cluster</label>\
             <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required>\
             <button type=\"submit\">Sign in</button></form>\
             <p class=\"hint\">For example <code>kubectl create token NAME</code>. The token is checked with a \
             TokenReview and kept in an HTTP-only cookie of this browser only; you see the Jobs of the \
             namespaces it may list.</p>"
        ),
    )
}

fn phase_badge(p: JobPhase) -> String {
    format!(
        "<span class=\"badge phase-{}\">{}</span>",
        p.label(),
        p.as_str()
    )
}

fn conditions_table(rows: &[ConditionRow], caption: &str) -> String {
    if rows.is_empty() {
        return "<p class=\"empty\">No conditions yet.</p>".into();
    }
    let mut out = format!(
        "<table class=\"grid\"><caption class=\"sr-only\">{}</caption><thead><tr>\
         <th scope=\"col\">Type</th><th scope=\"col\">Status</th><th scope=\"col\">Reason</th>\
         <th scope=\"col\">Message</th><th scope=\"col\">Age</th></tr></thead><tbody>",
        esc(caption)
    );
    for c in rows {
        let _ = write!(
            out,
            "<tr><td data-label=\"Type\">{}</td><td data-label=\"Status\">{}</td>\
             <td data-label=\"Reason\">{}</td><td data-label=\"Message\">{}</td>\
             <td data-label=\"Age\">{}</td></tr>",
            esc(&c.type_),
            esc(&c.status),
            esc(&c.reason),
            esc(&c.message),
            esc(&c.age)
        );
    }
    out.push_str("</tbody></table>");
    out
}

// ------------------------------------------------------------------------------- clusters

pub fn clusters_main(v: &ClustersView) -> String {
    format!(
        "<h1>Clusters</h1><div id=\"live\">{}</div>",
        clusters_live(v)
    )
}

pub fn clusters_live(v: &ClustersView) -> String {
    let mut out = format!(
        "<p class=\"summary\"><strong>{}</strong> of {} worker clusters Ready</p>",
        v.ready, v.total
    );
    if v.rows.is_empty() {
        out.push_str(
            "<p class=\"empty\">No worker cluster is registered. Add one with \
             <code>courier cluster add</code>.</p>",
        );
        return out;
    }
    out.push_str(
        "<table class=\"grid\" id=\"clusters\"><caption class=\"sr-only\">Worker clusters</caption>\
         <thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Ready</th><th scope=\"col\">Reason</th>\
         <th scope=\"col\">Version</th><th scope=\"col\">Mirrors</th><th scope=\"col\">Labels</th>\
         <th scope=\"col\">Last probe</th><th scope=\"col\">Placement</th></tr></thead><tbody>",
    );
    for r in &v.rows {
        let class = match (r.ready, r.state) {
            (true, _) => "ok",
            (false, "Pending") => "wait",
            (false, _) => "bad",
        };
        let message = if r.message.is_empty() {
            String::new()
        } else {
            format!("<div class=\"msg\">{}</div>", esc(&r.message))
        };
        let labels: String = r
            .labels
            .iter()
            .map(|l| format!("<span class=\"label\">{}</span>", esc(l)))
            .collect();
        let mut placement = if r.paused {
            "<span class=\"badge wait\">Paused</span>".to_string()
        } else {
            format!("weight {}", r.weight)
        };
        // `spec.namespaces` limits where mirrors may land; say so, as `cluster list -o wide` does.
        if !r.namespaces.is_empty() {
            let _ = write!(
                placement,
                "<div class=\"msg\" data-namespaces>namespaces: {}</div>",
                esc(&r.namespaces.join(", "))
            );
        }
        let _ = write!(
            out,
            "<tr data-cluster=\"{name}\" data-ready=\"{ready}\">\
             <th scope=\"row\" data-label=\"Name\"><a href=\"/jobs?cluster={q}\" data-key=\"c-{name}\">{name}</a></th>\
             <td data-label=\"Ready\"><span class=\"badge {class}\">{state}</span> <span class=\"muted\">for {since}</span></td>\
             <td data-label=\"Reason\" class=\"reason\">{reason}{message}</td>\
             <td data-label=\"Version\">{version}</td>\
             <td data-label=\"Mirrors\" class=\"num\">{mirrors}</td>\
             <td data-label=\"Labels\">{labels}</td>\
             <td data-label=\"Last probe\"><time datetime=\"{probe_at}\">{probe}</time></td>\
             <td data-label=\"Placement\">{placement}</td></tr>",
            name = esc(&r.name),
            q = url_encode(&r.name),
            ready = r.ready,
            state = r.state,
            since = esc(&r.since),
            reason = esc(&r.reason),
            version = esc(r.server_version.as_deref().unwrap_or("-")),
            mirrors = r.current_mirrors,
            probe_at = esc(r.last_probe.as_deref().unwrap_or("")),
            probe = esc(&r.last_probe_ago),
        );
    }
    out.push_str("</tbody></table>");
    out
}

// ------------------------------------------------------------------------------- Jobs

fn select(
    name: &str,
    label: &str,
    any: &str,
    options: &[(String, String)],
    chosen: &str,
) -> String {
    let mut out =
        format!("<label>{label}<select name=\"{name}\"><option value=\"\">{any}</option>");
    for (value, text) in options {
        let sel = if value == chosen { " selected" } else { "" };
        let _ = write!(
            out,
            "<option value=\"{}\"{sel}>{}</option>",
            esc(value),
            esc(text)
        );
    }
    out.push_str("</select></label>");
    out
}

fn filter_form(v: &JobsView) -> String {
    let f = &v.filter;
    let pairs = |list: &[String]| -> Vec<(String, String)> {
        list.iter().map(|s| (s.clone(), s.clone())).collect()
    };
    let phases: Vec<(String, String)> = ALL_PHASES
        .iter()
        .map(|p| (p.as_str().to_string(), p.as_str().to_string()))
        .collect();
    let order = if f.oldest_first {
        "<option value=\"newest\">Newest first</option><option value=\"oldest\" selected>Oldest first</option>"
    } else {
        "<option value=\"newest\" selected>Newest first</option><option value=\"oldest\">Oldest first</option>"
    };
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/jobs\" role=\"search\" aria-label=\"Filter Jobs\">\
         {ns}{cl}{ph}<label>Order<select name=\"sort\">{order}</select></label>\
         <span class=\"actions\"><button type=\"submit\">Apply</button>\
         <a class=\"button quiet\" href=\"/jobs\">Clear</a></span></form>",
        ns = select(
            "namespace",
            "Namespace",
            "All namespaces",
            &pairs(&v.namespaces),
            f.namespace.as_deref().unwrap_or("")
        ),
        cl = select(
            "cluster",
            "Cluster",
            "All clusters",
            &pairs(&v.clusters),
            f.cluster.as_deref().unwrap_or("")
        ),
        ph = select(
            "phase",
            "Phase",
            "All phases",
            &phases,
            f.phase.map(JobPhase::as_str).unwrap_or("")
        ),
    )
}

pub fn jobs_main(v: &JobsView) -> String {
    format!(
        "<h1>Jobs</h1>{}<div id=\"live\">{}</div>",
        filter_form(v),
        jobs_live(v)
    )
}

pub fn jobs_live(v: &JobsView) -> String {
    let mut out = String::from("<p class=\"summary\">");
    if v.matching == v.total {
        let _ = write!(out, "<strong>{}</strong> Jobs", v.total);
    } else {
        let _ = write!(
            out,
            "<strong>{}</strong> of {} Jobs match",
            v.matching, v.total
        );
    }
    if v.rows.len() < v.matching {
        let _ = write!(
            out,
            ", the {} {} shown",
            v.rows.len(),
            if v.filter.oldest_first {
                "oldest"
            } else {
                "newest"
            }
        );
    }
    out.push_str("</p>");
    if !v.phases.is_empty() {
        out.push_str("<ul class=\"chips\" aria-label=\"Jobs by phase\">");
        for (p, n) in &v.phases {
            let f = JobFilter {
                phase: Some(*p),
                ..v.filter.clone()
            };
            let _ = write!(
                out,
                "<li><a class=\"chip phase-{}\" href=\"/jobs?{}\" data-key=\"p-{}\">{} <strong>{n}</strong></a></li>",
                p.label(),
                f.to_query(),
                p.label(),
                p.as_str()
            );
        }
        out.push_str("</ul>");
    }
    if v.rows.is_empty() {
        out.push_str(if v.total == 0 {
            "<p class=\"empty\">No Jobs yet. Submit one with <code>courier submit job.yaml</code>.</p>"
        } else {
            "<p class=\"empty\">No Jobs match these filters.</p>"
        });
        return out;
    }
    out.push_str(
        "<table class=\"grid\" id=\"jobs\"><caption class=\"sr-only\">Jobs, by age</caption><thead><tr>\
         <th scope=\"col\">Job</th><th scope=\"col\">Cluster</th><th scope=\"col\">Phase</th>\
         <th scope=\"col\" class=\"num\">Succeeded</th><th scope=\"col\" class=\"num\">Failed</th>\
         <th scope=\"col\" class=\"num\">Active</th><th scope=\"col\">Age</th>\
         <th scope=\"col\" class=\"num\">Re-dispatches</th></tr></thead><tbody>",
    );
    for r in &v.rows {
        let cluster = match &r.cluster {
            Some(c) => esc(c),
            None => "<span class=\"muted\">not placed</span>".into(),
        };
        let waiting = match &r.waiting {
            Some(w) => format!("<div class=\"msg\">{}</div>", esc(w)),
            None => String::new(),
        };
        let completions = r
            .completions
            .map(|c| format!("<span class=\"muted\">/{c}</span>"))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr data-job=\"{ns}/{name}\" data-phase=\"{phase}\">\
             <th scope=\"row\" data-label=\"Job\"><a href=\"{href}\" data-key=\"{href}\">\
             <span class=\"ns\">{ns}/</span>{name}</a></th>\
             <td data-label=\"Cluster\">{cluster}</td>\
             <td data-label=\"Phase\">{badge}{waiting}</td>\
             <td data-label=\"Succeeded\" class=\"num\">{s}{completions}</td>\
             <td data-label=\"Failed\" class=\"num\">{f}</td>\
             <td data-label=\"Active\" class=\"num\">{a}</td>\
             <td data-label=\"Age\"><time datetime=\"{created}\">{age}</time></td>\
             <td data-label=\"Re-dispatches\" class=\"num\">{rd}</td></tr>",
            ns = esc(&r.namespace),
            name = esc(&r.name),
            phase = r.phase.as_str(),
            href = esc(&r.href),
            badge = phase_badge(r.phase),
            s = r.succeeded,
            f = r.failed,
            a = r.active,
            created = esc(r.created.as_deref().unwrap_or("")),
            age = esc(&r.age),
            rd = r.redispatches,
        );
    }
    out.push_str("</tbody></table>");
    out
}

// ------------------------------------------------------------------------------- one Job

pub fn job_main(v: &JobView) -> String {
    format!(
        "<nav class=\"crumbs\" aria-label=\"Breadcrumb\"><a href=\"/jobs\">Jobs</a> / \
         <a href=\"/jobs?namespace={q}\">{ns}</a></nav><h1>{ns}/{name}</h1><div id=\"live\">{live}</div>",
        q = url_encode(&v.namespace),
        ns = esc(&v.namespace),
        name = esc(&v.name),
        live = job_live(v)
    )
}

pub fn job_live(v: &JobView) -> String {
    let mut out = String::from(
        "<section aria-labelledby=\"h-placement\"><h2 id=\"h-placement\">Placement</h2><dl class=\"facts\">",
    );
    let mut fact = |k: &str, v: String| {
        let _ = write!(out, "<div><dt>{k}</dt><dd>{v}</dd></div>");
    };
    fact("Phase", phase_badge(v.phase));
    fact(
        "Cluster",
        match &v.cluster {
            Some(c) => format!(
                "<a id=\"job-cluster\" href=\"/jobs?cluster={}\">{}</a>",
                url_encode(c),
                esc(c)
            ),
            None => "<span id=\"job-cluster\" class=\"muted\">not placed yet</span>".into(),
        },
    );
    if let Some(state) = &v.cluster_state {
        fact("Cluster state", esc(state));
    }
    fact(
        "Epoch",
        v.epoch.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
    );
    fact("Re-dispatches", v.redispatches.to_string());
    fact("Cluster selector", esc(&v.selector));
    fact(
        "Pods",
        format!(
            "{} succeeded{}, {} failed, {} active",
            v.succeeded,
            v.completions
                .map(|c| format!(" of {c}"))
                .unwrap_or_default(),
            v.failed,
            v.active
        ),
    );
    fact(
        "Age",
        format!(
            "<time datetime=\"{}\">{}</time>",
            esc(v.created.as_deref().unwrap_or("")),
            esc(&v.age)
        ),
    );
    out.push_str("</dl>");
    out.push_str("<h3>Why</h3>");
    match (&v.waiting, v.plan.is_empty()) {
        (None, true) => out.push_str(
            "<p>Nothing to do: Courier's view of this Job matches the cluster it runs on.</p>",
        ),
        (waiting, _) => {
            if let Some(w) = waiting {
                let _ = write!(out, "<p class=\"notice wait\">Waiting: {}</p>", esc(w));
            }
            if !v.plan.is_empty() {
                out.push_str("<p>Next steps Courier plans:</p><ul class=\"plan\">");
                for p in &v.plan {
                    let _ = write!(out, "<li>{}</li>", esc(p));
                }
                out.push_str("</ul>");
            }
        }
    }
    out.push_str("</section>");

    out.push_str(
        "<section aria-labelledby=\"h-conditions\"><h2 id=\"h-conditions\">Conditions</h2>",
    );
    out.push_str(&conditions_table(&v.conditions, "Conditions of the Job"));
    out.push_str("</section>");

    out.push_str("<section aria-labelledby=\"h-mirrors\"><h2 id=\"h-mirrors\">Mirrors</h2>");
    if v.mirrors.is_empty() {
        out.push_str("<p class=\"empty\">No worker cluster is registered.</p>");
    }
    for m in &v.mirrors {
        let current = if m.current {
            " <span class=\"badge ok\">current</span>"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<div class=\"mirror\"><h3>{}{current}</h3><p class=\"obs\">{}</p>",
            esc(&m.cluster),
            esc(&m.observation)
        );
        if !m.conditions.is_empty() {
            out.push_str(&conditions_table(
                &m.conditions,
                &format!("Conditions of the mirror on {}", m.cluster),
            ));
        }
        out.push_str("</div>");
    }
    out.push_str("</section>");

    out.push_str("<section aria-labelledby=\"h-events\"><h2 id=\"h-events\">Events</h2>");
    if v.events.is_empty() {
        out.push_str(
            "<p class=\"empty\">Courier has recorded no event about this Job since it started.</p>",
        );
    } else {
        out.push_str(
            "<table class=\"grid\"><caption class=\"sr-only\">Events, newest first</caption><thead><tr>\
             <th scope=\"col\">Type</th><th scope=\"col\">Reason</th><th scope=\"col\">Message</th>\
             <th scope=\"col\" class=\"num\">Count</th><th scope=\"col\">Age</th></tr></thead><tbody>",
        );
        for e in &v.events {
            let class = if e.type_ == "Warning" { "bad" } else { "quiet" };
            let _ = write!(
                out,
                "<tr><td data-label=\"Type\"><span class=\"badge {class}\">{}</span></td>\
                 <td data-label=\"Reason\">{}</td><td data-label=\"Message\">{}</td>\
                 <td data-label=\"Count\" class=\"num\">{}</td><td data-label=\"Age\">{}</td></tr>",
                esc(&e.type_),
                esc(&e.reason),
                esc(&e.note),
                e.count,
                esc(&e.age)
            );
        }
        out.push_str("</tbody></table>");
    }
    let _ = write!(
        out,
        "<p class=\"hint\">The events Courier recorded (the latest {}). Events of the worker's own \
         controllers (pods, images, scheduling) are in <code>courier describe job {} -n {}</code>.</p></section>",
        crate::recent::PER_ORIGIN,
        esc(&v.name),
        esc(&v.namespace)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x\" onclick='y'>&</a>"),
            "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn pages_are_accessible_frames() {
        let html = page(
            &Chrome {
                title: "Jobs <x>",
                nav: Nav::Jobs,
                user: Some("alice<script>"),
            },
            "<p>hi</p>",
        );
        assert!(html.contains("<html lang=\"en\">"));
        assert!(html.contains("<a class=\"skip\" href=\"#main\">Skip to content</a>"));
        assert!(html.contains("<a href=\"/jobs\" aria-current=\"page\">Jobs</a>"));
        assert!(html.contains("<a href=\"/clusters\">Clusters</a>"));
        assert!(html.contains("<title>Jobs &lt;x&gt; · Courier</title>"));
        assert!(html.contains("alice&lt;script&gt;"));
        assert!(!html.contains("alice<script>"));
        assert!(html.contains("name=\"viewport\""));
    }

    fn row(name: &str, namespaces: &[&str]) -> ClusterRow {
        ClusterRow {
            name: name.into(),
            ready: true,
            state: "Ready",
            reason: "Connected".into(),
            message: String::new(),
            since: "5m".into(),
            server_version: None,
            current_mirrors: 0,
            labels: Vec::new(),
            weight: 1,
            paused: false,
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            last_probe: None,
            last_probe_ago: "never".into(),
        }
    }

    #[test]
    fn clusters_table_names_the_worker_namespaces_only_when_limited() {
        let html = clusters_live(&ClustersView {
            rows: vec![row("limited", &["team-a", "team<b>"]), row("open", &[])],
            ready: 2,
            total: 2,
        });
        let (limited, open) = html.split_once("data-cluster=\"open\"").expect("two rows");
        assert!(
            limited.contains("namespaces: team-a, team&lt;b&gt;"),
            "limited row: {limited}"
        );
        assert!(!open.contains("namespaces:"), "open row: {open}");
    }
}
