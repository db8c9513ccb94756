# Stub Vitis HLS commands: each records its name and arguments to $::hlsnn_log (one line
# per call) so tests can check what a rendered script asks the tool to do. `exit` stops
# sourcing without leaving tclsh.
set ::hlsnn_calls {}
foreach cmd {open_project set_top add_files open_solution set_part create_clock config_export
             csim_design csynth_design export_design cosim_design} {
  proc $cmd {args} [string map [list CMD $cmd] {lappend ::hlsnn_calls [list CMD {*}$args]}]
}
rename exit __real_exit
proc exit {args} { return -code return }
proc hlsnn_run {script argv_list log} {
  set ::argv $argv_list
  set ::argc [llength $argv_list]
  set cwd [pwd]
  cd [file dirname $script]
  uplevel #0 [list source [file tail $script]]
  cd $cwd
  set f [open $log w]
  foreach c $::hlsnn_calls { puts $f $c }
  close $f
}
hlsnn_run [lindex $argv 0] [lrange $argv 2 end] [lindex $argv 1]
