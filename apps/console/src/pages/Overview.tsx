import { useMemo, useState } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { api, type Session } from '../api';
import { lastDays, periodName, usd, when } from '../format';
import type { ActivityRow, Credits, KeyRecord } from '../records';
import { Card, Empty, ErrorText, Loading, Page, Table, useLoad } from '../ui';
import { dailySpendSeries, keyLimits, modelColours, percent, spendLines, spendTotals, type DayBar, type KeyLimit, type SpendSeries } from './overview-data';
import './Overview.css';

export function Overview(_props: { session: Session }) {
  // One "now" per visit (and per refresh), so today, the month and the 30 days agree.
  const [now, setNow] = useState(() => new Date());
  const credits = useLoad(() => api<{ data: Credits }>('GET', '/credits').then((r) => r.data), [now]);
  const activity = useLoad(() => api<{ data: ActivityRow[] }>('GET', '/activity').then((r) => r.data), [now]);
  const keys = useLoad(() => api<{ data: KeyRecord[] }>('GET', '/keys').then((r) => r.data), [now]);
  const refreshing = credits.loading || activity.loading || keys.loading;
  return (
    <Page
      title="Overview"
      intro="Credits, spend of the last 30 days and the spend limits of this workspace's keys. Amounts in USD; days are UTC days."
      actions={
        <button type="button" className="secondary" onClick={() => setNow(new Date())} disabled={refreshing}>
          {refreshing ? 'Refreshing…' : 'Refresh'}
        </button>
      }
    >
      <Card title="Credits">
        {credits.error ? <ErrorText error={credits.error} /> : credits.data ? <CreditStats credits={credits.data} /> : <Loading what="credits" />}
      </Card>
      <Card title="Spend">
        {activity.error ? <ErrorText error={activity.error} /> : activity.data ? <Spend rows={activity.data} now={now} /> : <Loading what="spend" />}
      </Card>
      <Card title="Spend limits">{keys.error ? <ErrorText error={keys.error} /> : keys.data ? <KeyLimits keys={keys.data} /> : <Loading what="keys" />}</Card>
    </Page>
  );
}

function Stat({ id, label, value, note }: { id: string; label: string; value: string; note?: string }) {
  return (
    <div className="stat" role="group" aria-labelledby={`stat-${id}`}>
      <span className="stat-label" id={`stat-${id}`}>
        {label}
      </span>
      <span className="stat-value">{value}</span>
      {note && <span className="muted small">{note}</span>}
    </div>
  );
}

function CreditStats({ credits }: { credits: Credits }) {
  return (
    <div className="stats">
      <Stat id="balance" label="Balance" value={usd(credits.balance)} note={`${usd(credits.total_credits)} credits − ${usd(credits.total_usage)} used`} />
      <Stat id="held" label="Held" value={usd(credits.held)} note="worst case of requests running now" />
      <Stat id="open-holds" label="Open holds" value={String(credits.open_holds)} />
      <Stat id="available" label="Available" value={usd(credits.available)} note="balance − held" />
    </div>
  );
}

function Spend({ rows, now }: { rows: ActivityRow[]; now: Date }) {
  const days = useMemo(() => lastDays(now, 30), [now]);
  const totals = spendTotals(rows, now, days);
  const series = useMemo(() => dailySpendSeries(rows, days), [rows, days]);
  return (
    <>
      <div className="stats">
        <Stat id="today" label="Spend today" value={usd(totals.today)} note={days[days.length - 1]} />
        <Stat
          id="month"
          label="Spend this month"
          value={usd(totals.month)}
          note={totals.monthFrom ? `since ${totals.monthFrom} (activity keeps 30 days)` : days[days.length - 1].slice(0, 7)}
        />
      </div>
      {series.models.length === 0 ? <Empty>No spend in the last 30 days.</Empty> : <SpendChart series={series} />}
    </>
  );
}

function SpendChart({ series }: { series: SpendSeries }) {
  const lines = spendLines(series);
  const colours = useMemo(() => modelColours(series.models), [series.models]);
  return (
    <figure className="overview-chart" aria-label="Daily spend per model">
      <div className="overview-chart-plot">
        <ResponsiveContainer width="100%" height="100%" initialDimension={{ width: 640, height: 280 }}>
          <BarChart data={series.bars} margin={{ top: 8, right: 8, bottom: 0, left: 8 }}>
            <CartesianGrid vertical={false} stroke="#e3e7ed" />
            <XAxis dataKey="day" tickFormatter={(day: string) => day.slice(5)} tick={{ fontSize: 12, fill: '#525c6b' }} minTickGap={12} />
            <YAxis tickFormatter={(v: number) => usd(v)} tick={{ fontSize: 12, fill: '#525c6b' }} width={84} />
            <Tooltip
              formatter={(value) => usd(typeof value === 'number' ? value : Number(value))}
              labelFormatter={(day) => `${String(day)} (UTC)`}
              cursor={{ fill: 'rgb(29 78 216 / 8%)' }}
            />
            <Legend wrapperStyle={{ fontSize: 13 }} />
            {series.models.map((model, i) => (
              // null, not 0, for a day without spend: the tooltip then leaves the model out.
              <Bar key={model} dataKey={(bar: DayBar) => bar.spend[model] || null} name={model} stackId="spend" fill={colours[i]} isAnimationActive={false} />
            ))}
          </BarChart>
        </ResponsiveContainer>
      </div>
      <figcaption className="muted small">Daily spend per model, the last 30 UTC days.</figcaption>
      <details>
        <summary>Show as a table</summary>
        <Table label="Daily spend per model">
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col">Model</th>
              <th scope="col" className="num">
                Cost
              </th>
            </tr>
          </thead>
          <tbody>
            {lines.map((line) => (
              <tr key={`${line.day} ${line.model}`}>
                <td className="nowrap">{line.day}</td>
                <td className="mono nowrap">{line.model}</td>
                <td className="num">{usd(line.cost)}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      </details>
    </figure>
  );
}

function KeyLimits({ keys }: { keys: KeyRecord[] }) {
  const limits = keyLimits(keys);
  if (limits.length === 0) return <Empty>No keys in this workspace yet.</Empty>;
  return (
    <ul className="overview-limits">
      {limits.map((limit) => (
        <KeyLimitItem key={limit.id} limit={limit} />
      ))}
    </ul>
  );
}

const LEVEL_WORDS = { ok: null, warn: 'near its limit', bad: 'limit reached' } as const;

function KeyLimitItem({ limit }: { limit: KeyLimit }) {
  const words = LEVEL_WORDS[limit.level];
  return (
    <li className="overview-limit">
      <div className="overview-limit-head">
        <span className="overview-limit-name">{limit.name}</span>
        <span className="mono muted small">{limit.hint}</span>
        {limit.limit === null ? <span className="badge">no limit</span> : words && <span className={`badge ${limit.level}`}>{words}</span>}
      </div>
      {limit.limit === null ? (
        <p className="muted small">No spend limit. {usd(limit.lifetime)} spent since it was made.</p>
      ) : (
        <>
          <meter
            className={`gauge ${limit.level}`}
            min={0}
            max={1}
            value={limit.share ?? 0}
            aria-label={`${limit.name}: share of its ${periodName(limit.period)} limit used`}
            aria-valuetext={`${percent(limit.share ?? 0)} used`}
          />
          <p className="small">
            {usd(limit.used)} of {usd(limit.limit)} {periodName(limit.period)} limit used ({percent(limit.share ?? 0)}) · {usd(limit.remaining)} remaining
            {limit.resetsAt && <span className="muted"> · resets {when(limit.resetsAt)}</span>}
          </p>
        </>
      )}
    </li>
  );
}
