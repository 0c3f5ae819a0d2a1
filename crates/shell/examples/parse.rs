//! Print what pinfold-shell makes of a command: `cargo run -p pinfold-shell --example parse -- 'text'`.
fn main() {
    let text = std::env::args().nth(1).unwrap_or_default();
    match pinfold_shell::parse(&text) {
        Ok(tree) => {
            for (i, c) in tree.commands.iter().enumerate() {
                println!(
                    "{i}: {:?} span={:?} {:?} kind={:?} ctx={:?} parent={:?} wrappers={:?} unresolved={:?} assigns={:?} redirects={:?}",
                    &tree.source[c.span.clone()],
                    c.span,
                    c.words.iter().map(|w| if w.dynamic { format!("~{}~", w.text) } else { w.text.clone() }).collect::<Vec<_>>(),
                    c.kind,
                    c.context,
                    c.parent,
                    c.wrappers,
                    c.unresolved,
                    c.assignments.iter().map(|a| format!("{}={}", a.name, a.value.text)).collect::<Vec<_>>(),
                    c.redirects.iter().map(|r| format!("{:?}{}{}", r.fd, r.op, r.target.as_ref().map(|t| t.text.as_str()).unwrap_or(""))).collect::<Vec<_>>(),
                );
            }
        }
        Err(e) => println!("UNPARSEABLE: {e}"),
    }
}
