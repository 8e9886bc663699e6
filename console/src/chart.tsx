// A bar chart in SVG (no library): one bar per day, labelled for screen readers by a table.
import { useId } from 'preact/hooks';

export interface Bar {
  /** The day, YYYY-MM-DD. */
  label: string;
  value: number;
}

export function BarChart({ title, bars, unit }: { title: string; bars: Bar[]; unit: string }) {
  const id = useId();
  const w = 600;
  const h = 160;
  const pad = 24;
  const max = Math.max(1, ...bars.map((b) => b.value));
  const bw = bars.length ? (w - pad) / bars.length : 0;
  return (
    <figure class="chart" aria-labelledby={id}>
      <figcaption id={id}>{title}</figcaption>
      <svg viewBox={`0 0 ${w} ${h + pad}`} role="img" aria-label={`${title}: ${bars.length} days, at most ${max} ${unit} a day`} preserveAspectRatio="none">
        <line class="axis" x1={pad} y1={h} x2={w} y2={h} />
        <text class="tick" x={0} y={12}>
          {max}
        </text>
        <text class="tick" x={0} y={h}>
          0
        </text>
        {bars.map((b, i) => {
          const bh = (b.value / max) * (h - 16);
          return (
            <rect key={b.label} class="bar" x={pad + i * bw + 1} y={h - bh} width={Math.max(1, bw - 2)} height={bh}>
              <title>{`${b.label}: ${b.value} ${unit}`}</title>
            </rect>
          );
        })}
        {bars.length > 0 && (
          <>
            <text class="tick" x={pad} y={h + 18}>
              {bars[0]!.label}
            </text>
            <text class="tick tick-end" x={w} y={h + 18}>
              {bars[bars.length - 1]!.label}
            </text>
          </>
        )}
      </svg>
      <details class="chart-data">
        <summary>The data as a table</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">Day</th>
              <th scope="col">{unit}</th>
            </tr>
          </thead>
          <tbody>
            {bars.map((b) => (
              <tr key={b.label}>
                <td>{b.label}</td>
                <td class="num">{b.value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
