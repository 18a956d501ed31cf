//! Charts drawn on the server as inline SVG. The page's Content-Security-Policy forbids `style`
//! attributes, so shapes are sized with SVG presentation attributes (`width`, `height`) and coloured by
//! the stylesheet's classes. Lengths come from exact decimal ratios rounded to whole units: no float
//! touches the amounts.

use maud::{html, Markup};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;

/// One bar: a label, its value, and the value as text.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub label: String,
    pub value: Decimal,
    pub text: String,
}

/// `value / max` in thousandths, 0 to 1000 (0 when `max` is not positive).
fn per_mille(value: Decimal, max: Decimal) -> i64 {
    if max <= Decimal::ZERO || value <= Decimal::ZERO {
        return 0;
    }
    value.checked_mul(Decimal::from(1000)).and_then(|v| v.checked_div(max)).and_then(|v| v.round().to_i64()).unwrap_or(0).clamp(0, 1000)
}

/// Horizontal bars, one table row each: the label and value stay text (readable at any width), the bar
/// is an SVG that stretches to its cell.
pub(crate) fn bars(caption: &str, bars: &[Bar]) -> Markup {
    let max = bars.iter().map(|b| b.value).max().unwrap_or(Decimal::ZERO);
    html! {
        figure.chart {
            figcaption { (caption) }
            @if bars.is_empty() {
                p.empty { "Nothing yet." }
            } @else {
                table.bars {
                    tbody {
                        @for bar in bars {
                            tr {
                                th scope="row" { (bar.label) }
                                td.bar {
                                    svg viewBox="0 0 1000 10" preserveAspectRatio="none" role="img" aria-label=(format!("{}: {}", bar.label, bar.text)) {
                                        rect.track x="0" y="0" width="1000" height="10" {}
                                        rect.fill x="0" y="0" width=(per_mille(bar.value, max)) height="10" {}
                                    }
                                }
                                td.num { (bar.text) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Vertical columns, one per bar in order (days, say), with the first and last labels under the chart and
/// every value in a `title` (shown on hover) and in the table that follows the chart.
pub(crate) fn columns(caption: &str, bars: &[Bar]) -> Markup {
    let max = bars.iter().map(|b| b.value).max().unwrap_or(Decimal::ZERO);
    let width = i64::try_from(bars.len()).unwrap_or(0) * 10;
    html! {
        figure.chart {
            figcaption { (caption) }
            @if bars.is_empty() {
                p.empty { "Nothing yet." }
            } @else {
                svg.columns viewBox=(format!("0 0 {width} 100")) preserveAspectRatio="none" role="img" aria-label=(caption) {
                    @for (i, bar) in bars.iter().enumerate() {
                        @let h = per_mille(bar.value, max) / 10;
                        rect.fill x=(i64::try_from(i).unwrap_or(0) * 10 + 1) y=(100 - h) width="8" height=(h) {
                            title { (bar.label) ": " (bar.text) }
                        }
                    }
                }
                div.axis {
                    span { (bars.first().map(|b| b.label.as_str()).unwrap_or("")) }
                    span { (bars.last().map(|b| b.label.as_str()).unwrap_or("")) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_exact_thousandths() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(per_mille(d("0.000033"), d("0.000066")), 500);
        assert_eq!(per_mille(d("1"), d("3")), 333);
        assert_eq!(per_mille(d("3"), d("3")), 1000);
        assert_eq!(per_mille(d("1"), Decimal::ZERO), 0);
        assert_eq!(per_mille(d("-1"), d("3")), 0);
    }
}
