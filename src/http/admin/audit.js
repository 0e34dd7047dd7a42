// The console's audit log screen (#/audit): the shop's changes by people and keys, newest first,
// filtered by who, kind and dates, 50 a page (GraphQL auditLog, owners only: the server refuses
// others and the page shows its message). Uses admin.js's helpers (gql, row, when, say, show,
// guarded, $), loaded before it; like them, writes every value as text, never as HTML.
'use strict';

const AUDIT_PAGE = 50;
const auditState = { filter: {}, after: null };

const AUDIT_QUERY = `query Audit($first: Int, $after: String, $actor: ID, $kind: String, $from: DateTime, $to: DateTime) {
  auditLog(first: $first, after: $after, actor: $actor, kind: $kind, from: $from, to: $to) {
    edges { node { at actorKind actorId actorLabel kind subjectType subjectId before after } }
    pageInfo { hasNextPage endCursor }
  }
}`;

/** A before or after value as short JSON text (null: nothing, a creation's before or a deletion's after). */
function auditValue(value) {
  const code = document.createElement('code');
  code.textContent = value === null || value === undefined ? '' : JSON.stringify(value);
  return code;
}

/** The actor's label as a button that keeps only their changes. */
function auditActor(node) {
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = `${node.actorLabel}${node.actorKind === 'api_key' ? ' (key)' : ''}`;
  button.title = 'Only this actor\'s changes';
  button.addEventListener('click', guarded(async () => {
    $('#audit-actor').value = node.actorId;
    await auditSearch();
  }));
  return button;
}

async function auditPage(append) {
  const data = await gql(AUDIT_QUERY, { ...auditState.filter, first: AUDIT_PAGE, after: append ? auditState.after : null });
  const body = $('#audit-rows tbody');
  if (!append) body.replaceChildren();
  for (const { node } of data.auditLog.edges) {
    body.append(row([when(node.at), auditActor(node), node.kind, node.subjectId ? `${node.subjectType} ${node.subjectId}` : '', auditValue(node.before), auditValue(node.after)]));
  }
  auditState.after = data.auditLog.pageInfo.endCursor;
  $('#audit-more').hidden = !data.auditLog.pageInfo.hasNextPage;
  $('#audit-empty').hidden = body.children.length > 0;
}

/** The form's filters; dates are whole days in the browser's zone, `to` included. */
async function auditSearch() {
  const form = $('#audit-form');
  const day = (value, next) => {
    if (!value) return null;
    const d = new Date(`${value}T00:00:00`);
    if (next) d.setDate(d.getDate() + 1);
    return d.toISOString();
  };
  auditState.filter = {
    actor: form.actor.value.trim() || null,
    kind: form.kind.value.trim() || null,
    from: day(form.from.value, false),
    to: day(form.to.value, true),
  };
  await auditPage(false);
}

/** The route admin.js sends #/audit to. */
async function showAudit() {
  show('audit');
  await auditSearch();
}

$('#audit-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  say('');
  await auditSearch();
}));
$('#audit-more').addEventListener('click', guarded(() => auditPage(true)));

SECTIONS.push('audit');
SCREENS.audit = showAudit;
