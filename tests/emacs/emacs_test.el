;;; emacs_test.el --- editors/emacs/netrun-mode.el in Emacs (tests/lsp.bats)  -*- lexical-binding: t; -*-

;; emacs --batch -l emacs_test.el EDITORS FILE: loads the major mode from
;; EDITORS/emacs, opens FILE and prints, one a line, what the test
;; compares: the major mode, the face of the first `input' keyword and of
;; the first comment (its delimiter and its text), whether reindenting the
;; whole buffer keeps `netrun fmt''s layout, and the command eglot would
;; start for the buffer, with `netrun-program' set after loading (as a
;; user's configuration may).
;; Debian 12's Emacs 28 has no eglot: a stand-in feature `eglot' holding
;; only `eglot-server-programs' (as eglot defines it) is provided first,
;; so the mode's `with-eval-after-load' form runs as with the real one;
;; where eglot exists (Emacs 29), the real one is loaded.

(let ((editors (nth 0 command-line-args-left))
      (file (nth 1 command-line-args-left)))
  (setq command-line-args-left nil)
  (if (locate-library "eglot")
      (require 'eglot)
    (defvar eglot-server-programs nil)
    (provide 'eglot))
  (add-to-list 'load-path (expand-file-name "emacs" editors))
  (require 'netrun-mode)
  (find-file file)
  (font-lock-ensure)
  (princ (format "mode %s\n" major-mode))
  (goto-char (point-min))
  (re-search-forward "^input")
  (princ (format "keyword %s %s\n" (match-string 0) (get-text-property (match-beginning 0) 'face)))
  (goto-char (point-min))
  (re-search-forward "# *")
  (princ (format "comment %s %s\n" (get-text-property (match-beginning 0) 'face)
                 (get-text-property (match-end 0) 'face)))
  (let* ((before (buffer-string))
         (inhibit-message t))
    (indent-region (point-min) (point-max))
    (let ((at (compare-strings before nil nil (buffer-string) nil nil)))
      (princ (if (eq at t) "indent kept\n"
               (format "indent changed line %d\n" (line-number-at-pos (abs at)))))))
  (setq netrun-program "/opt/netrun/bin/netrun")
  (let* ((entry (assq 'netrun-mode eglot-server-programs))
         (contact (cdr entry)))
    (princ (format "eglot %S\n" (if (functionp contact) (funcall contact nil) contact)))))
